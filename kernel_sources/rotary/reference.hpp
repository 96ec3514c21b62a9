// rotary_embedding in float64: the reference its tests judge the kernel by.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

namespace jitk_reference {

// x [tokens, heads, head_dim] rotated in place: in each head, pair j of the first rotary_dim
// elements ((j, j + rotary_dim/2) when neox, else (2j, 2j+1)) turns by positions[t] * theta^(-2j/rotary_dim),
// or by the angle whose cos and sin are cos_sin[pos][j] and cos_sin[pos][rotary_dim/2 + j] when a
// table is given (a position outside [0, max_position) leaves its token's heads as they are).
inline void rotary_embedding(std::vector<double>& x, std::int64_t tokens, std::int64_t heads, std::int64_t head_dim,
                             std::int64_t rotary_dim, bool neox, const std::vector<std::int64_t>& positions, double theta,
                             const std::vector<double>* cos_sin = nullptr, std::int64_t max_position = 0) {
  const std::int64_t half = rotary_dim / 2;
  for (std::int64_t t = 0; t < tokens; ++t) {
    const std::int64_t pos = positions[t];
    if (cos_sin && (pos < 0 || pos >= max_position)) continue;
    for (std::int64_t h = 0; h < heads; ++h) {
      double* head = x.data() + (t * heads + h) * head_dim;
      for (std::int64_t j = 0; j < half; ++j) {
        double c, s;
        if (cos_sin) {
          c = (*cos_sin)[pos * rotary_dim + j];
          s = (*cos_sin)[pos * rotary_dim + half + j];
        } else {
          const double angle = double(pos) * std::pow(theta, -2.0 * double(j) / double(rotary_dim));
          c = std::cos(angle);
          s = std::sin(angle);
        }
        double& a = neox ? head[j] : head[2 * j];
        double& b = neox ? head[j + half] : head[2 * j + 1];
        const double ra = a * c - b * s, rb = b * c + a * s;
        a = ra;
        b = rb;
      }
    }
  }
}

}  // namespace jitk_reference
