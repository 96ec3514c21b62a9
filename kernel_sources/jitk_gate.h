// jitk_gate.h: gemm's gate param (gate = silu, gelu or gelu_tanh; the prelude's JITK_GATE_<VALUE>) as
// what its gated kernels compute, one mapping for CPU and GPU text alike. A text includes it after
// jitk_cpu.h or jitk_gpu.h, whose activations it names:
//   JITK_GATED                  1 for a gated kernel, else 0
//   jitk::JITK_GATE_ACTIVATION  the gate's activation (jitk::silu, gelu, gelu_tanh; silu where
//                               there is no gate, so code for the gated case compiles unused)
#pragma once
#if JITK_GATE_SILU || JITK_GATE_GELU || JITK_GATE_GELU_TANH
#define JITK_GATED 1
#else
#define JITK_GATED 0
#endif
#if JITK_GATE_GELU_TANH
#define JITK_GATE_ACTIVATION gelu_tanh
#elif JITK_GATE_GELU
#define JITK_GATE_ACTIVATION gelu
#else
#define JITK_GATE_ACTIVATION silu
#endif
