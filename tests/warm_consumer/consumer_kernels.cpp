// The consumer's own kernels, registered by the program and by `jitk warm --kernels` (the module).
#include "consumer_kernels.hpp"

#include <jit/kernel_module.hpp>

void register_consumer_kernels() { jit::declare<AddOne>(); }

JITK_KERNEL_MODULE(register_consumer_kernels)
