// One AdamW step in float64: the reference its tests judge the kernel by.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace jitk_reference {

// One AdamW step (torch.optim.AdamW) in float64: param, m and v updated in place.
template <class G>
void adamw(std::vector<double>& param, const std::vector<G>& grad, std::vector<double>& m, std::vector<double>& v,
           double lr, std::int64_t step, double beta1, double beta2, double eps, double weight_decay) {
  const double bc1 = 1 - std::pow(beta1, double(step)), bc2 = 1 - std::pow(beta2, double(step));
  for (std::size_t i = 0; i < param.size(); ++i) {
    const double g = double(grad[i]);
    param[i] *= 1 - lr * weight_decay;
    m[i] = beta1 * m[i] + (1 - beta1) * g;
    v[i] = beta2 * v[i] + (1 - beta2) * g * g;
    param[i] -= lr / bc1 * m[i] / (std::sqrt(v[i] / bc2) + eps);
  }
}

}  // namespace jitk_reference
