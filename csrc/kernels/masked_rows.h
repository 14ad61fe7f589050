// masked_rows: y = x[mask], the rows of x (dim 0) whose mask entry is non-zero, in order.
//
// Two launches share one workspace, so that a caller that must size y first (eager torch) can read
// K back in between, and one that allocated y for K = rows (TensorRT) runs them back to back:
//   maskedRowsCount:   mask -> one bit per row, per-tile offsets within groups of tiles, the groups' exclusive
//                      scan, K   (reads the mask once)
//   maskedRowsScatter: per-tile prefix of the bits + the tile's and its group's offsets -> each kept row's
//                      destination; copy
// Neither synchronizes with the host.
#pragma once

#include <cstddef>

#include "sdk/dtypes.h"

namespace ttp
{

// Workspace bytes for up to `rows` rows, whatever the row size.
size_t maskedRowsWorkspaceSize(int64_t rows);

// mask: `rows` entries of maskDType (kBOOL or kINT8: one byte; kINT32; kINT64), non-zero keeps the row.
// Fills `workspace` for maskedRowsScatter with the same rows and rowBytes, and writes K to `count`,
// a device scalar of countDType (kINT32 or kINT64).
cudaError_t maskedRowsCount(void const* mask, DType maskDType, int64_t rows, int64_t rowBytes, void* workspace,
    void* count, DType countDType, cudaStream_t stream);

// x: rows x rowBytes, contiguous; y: K x rowBytes. `workspace` as left by maskedRowsCount.
cudaError_t maskedRowsScatter(
    void const* x, void* y, int64_t rows, int64_t rowBytes, void const* workspace, cudaStream_t stream);

} // namespace ttp
