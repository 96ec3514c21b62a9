// The support of a block-sparse matrix: which block x block blocks of a rows x cols matrix are
// present. Built once from a mask; its index (row-wise and column-wise) is what the
// block_sparse_matmul kernels walk, uploaded once where they run.
#pragma once
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "jit/error.hpp"

namespace jit {

class BlockMask {
 public:
  // mask: (rows / block) x (cols / block) flags, row-major; rows and cols multiples of block.
  BlockMask(std::int64_t rows, std::int64_t cols, std::int64_t block, const std::vector<std::uint8_t>& mask)
      : rows_(rows), cols_(cols), block_(block) {
    auto fail = [](const std::string& what) { throw Error(ErrorCode::InvalidArgument, "BlockMask: " + what); };
    if (block != 16 && block != 32 && block != 64) fail("block must be 16, 32 or 64, got " + std::to_string(block));
    if (rows <= 0 || cols <= 0 || rows % block || cols % block)
      fail(std::to_string(rows) + " x " + std::to_string(cols) + " is not a positive multiple of the block (" +
           std::to_string(block) + ") in both dimensions");
    const std::int64_t br = rows / block, bc = cols / block;
    if (br > (std::int64_t{1} << 30) / bc) fail("too many blocks (" + std::to_string(br) + " x " + std::to_string(bc) + ")");
    if (static_cast<std::int64_t>(mask.size()) != br * bc)
      fail("the mask has " + std::to_string(mask.size()) + " flags; " + std::to_string(br) + " x " + std::to_string(bc) +
           " blocks need " + std::to_string(br * bc));
    // ids in row-major order: row_ptr, then each block's column and row
    std::vector<std::int32_t> row_ptr(1, 0), col_of, row_of;
    for (std::int64_t r = 0; r < br; ++r) {
      for (std::int64_t c = 0; c < bc; ++c)
        if (mask[static_cast<std::size_t>(r * bc + c)]) {
          col_of.push_back(static_cast<std::int32_t>(c));
          row_of.push_back(static_cast<std::int32_t>(r));
        }
      row_ptr.push_back(static_cast<std::int32_t>(col_of.size()));
    }
    nnz_ = static_cast<std::int64_t>(col_of.size());
    // the column-wise index: col_ptr, then the ids column by column (rows ascending)
    std::vector<std::int32_t> col_ptr(static_cast<std::size_t>(bc + 1), 0), by_col(col_of.size());
    for (std::int32_t c : col_of) ++col_ptr[static_cast<std::size_t>(c) + 1];
    for (std::size_t c = 0; c < static_cast<std::size_t>(bc); ++c) col_ptr[c + 1] += col_ptr[c];
    std::vector<std::int32_t> fill(col_ptr.begin(), col_ptr.end() - 1);
    for (std::size_t id = 0; id < col_of.size(); ++id) by_col[static_cast<std::size_t>(fill[static_cast<std::size_t>(col_of[id])]++)] = static_cast<std::int32_t>(id);
    // the block rows and columns by their count of blocks, most first (ties in order): GPU kernels
    // hand out their tiles in this order so the long ones start first and the short ones fill in
    const auto by_count = [](const std::vector<std::int32_t>& ptr) {
      std::vector<std::int32_t> order(ptr.size() - 1);
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int32_t>(i);
      std::stable_sort(order.begin(), order.end(), [&](std::int32_t x, std::int32_t y) {
        return ptr[static_cast<std::size_t>(x) + 1] - ptr[static_cast<std::size_t>(x)] >
               ptr[static_cast<std::size_t>(y) + 1] - ptr[static_cast<std::size_t>(y)];
      });
      return order;
    };
    std::vector<std::int32_t> rows_by_count = by_count(row_ptr), cols_by_count = by_count(col_ptr);
    for (const std::vector<std::int32_t>* part : {&row_ptr, &col_of, &row_of, &col_ptr, &by_col, &rows_by_count, &cols_by_count})
      index_.insert(index_.end(), part->begin(), part->end());
  }

  // Each block present with probability `density` (at least one block), from `seed`.
  static BlockMask random(std::int64_t rows, std::int64_t cols, std::int64_t block, double density, std::uint64_t seed = 1) {
    std::mt19937_64 rng(seed);
    std::bernoulli_distribution keep(density);
    std::vector<std::uint8_t> mask(static_cast<std::size_t>(std::max<std::int64_t>(0, (rows / std::max<std::int64_t>(1, block)) * (cols / std::max<std::int64_t>(1, block)))));
    for (auto& m : mask) m = keep(rng) ? 1 : 0;
    if (!mask.empty()) mask[0] = 1;
    return BlockMask(rows, cols, block, mask);
  }

  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  std::int64_t block() const { return block_; }
  std::int64_t block_rows() const { return rows_ / block_; }
  std::int64_t block_cols() const { return cols_ / block_; }
  std::int64_t nnz() const { return nnz_; }  // blocks present
  double density() const { return static_cast<double>(nnz_) / static_cast<double>(block_rows() * block_cols()); }
  // Block `id` (0 <= id < nnz, row-major order) sits at block row row_of(id), block column col_of(id);
  // a sparse matrix's values are its nnz blocks, block x block row-major each, in id order.
  std::int32_t row_of(std::int64_t id) const { return index_[static_cast<std::size_t>(block_rows() + 1 + nnz_ + id)]; }
  std::int32_t col_of(std::int64_t id) const { return index_[static_cast<std::size_t>(block_rows() + 1 + id)]; }
  // What the kernels read, in this order: row_ptr[block_rows + 1], col_of[nnz], row_of[nnz],
  // col_ptr[block_cols + 1], by_col[nnz] (ids column by column), rows_by_count[block_rows],
  // cols_by_count[block_cols] (block rows and columns, most blocks first). Copy it to the device
  // once for GPU launches (jit::cuda::DeviceArray<std::int32_t>(mask.index())).
  const std::vector<std::int32_t>& index() const { return index_; }

 private:
  std::int64_t rows_, cols_, block_, nnz_ = 0;
  std::vector<std::int32_t> index_;
};

}  // namespace jit
