#include "deform_conv2d.h"

#include "channels_last.cuh"
#include "op_fields.h"
#include "type_utils.cuh"

#include <algorithm>
#include <limits>
#include <mma.h>
#include <type_traits>

namespace ttp::vision
{
namespace
{

namespace wmma = nvcuda::wmma;

struct Problem
{
    int batch, channels, height, width;
    int outChannels, kernelH, kernelW, outH, outW;
    int strideH, strideW, padH, padW, dilationH, dilationW;
    int groups, offsetGroups;
    bool useMask;
    int groupChannels;       // C / groups: the GEMM's K is groupChannels * taps
    int groupOutChannels;    // O / groups: the GEMM's N
    int offsetGroupChannels; // C / offset_groups
    int taps;                // kh * kw
    int pixels;              // out_h * out_w
    int depth;               // groupChannels * taps, in the weight's own order (channel-major, then tap)
    int64_t rows;            // N * pixels: the GEMM's M
};

// What the tensor-core product of T takes: fp16 and bf16 multiply in their own type (k = 16); fp32 in TF32 (k = 8),
// three products per step, so that the TF32 rounding of either operand does not reach the result.
template <typename T>
struct MmaTraits;

template <>
struct MmaTraits<float>
{
    using Operand = wmma::precision::tf32;
    static constexpr int kK = 8;
    static constexpr bool kSplit = true;
};

template <>
struct MmaTraits<__half>
{
    using Operand = __half;
    static constexpr int kK = 16;
    static constexpr bool kSplit = false;
};

template <>
struct MmaTraits<__nv_bfloat16>
{
    using Operand = __nv_bfloat16;
    static constexpr int kK = 16;
    static constexpr bool kSplit = false;
};

constexpr int kChunk = 32; // K per shared-memory tile
constexpr int kPad = 8;    // keeps the column-major tiles' columns off one bank, and wmma's 32-byte alignment

// One sampling point of torchvision's bilinear interpolation for deformable convolution: the four corners' indices
// into a channel plane (-1 for a corner outside the image, which counts as zero, unlike RoIAlign's border clamp), their
// weights, and the modulation mask. It depends on the output pixel, the kernel tap and the offset group, not on the
// channel: computed once, it serves every channel of the K-chunks that share the tap.
struct SamplePoint
{
    int corner[4];
    float weight[4];
    float mask;
};

__device__ __forceinline__ SamplePoint samplePoint(float y, float x, int height, int width, float mask)
{
    SamplePoint s{{-1, -1, -1, -1}, {0.0F, 0.0F, 0.0F, 0.0F}, mask};
    if (!(y > -1.0F && y < static_cast<float>(height) && x > -1.0F && x < static_cast<float>(width)))
    {
        return s;
    }
    float const yFloor = floorf(y);
    float const xFloor = floorf(x);
    int const y0 = static_cast<int>(yFloor);
    int const x0 = static_cast<int>(xFloor);
    float const ly = y - yFloor;
    float const lx = x - xFloor;
    float const hy = 1.0F - ly;
    float const hx = 1.0F - lx;
    bool const top = y0 >= 0;
    bool const bottom = y0 + 1 < height;
    bool const left = x0 >= 0;
    bool const right = x0 + 1 < width;
    int const base = y0 * width + x0;
    s.corner[0] = top && left ? base : -1;
    s.corner[1] = top && right ? base + 1 : -1;
    s.corner[2] = bottom && left ? base + width : -1;
    s.corner[3] = bottom && right ? base + width + 1 : -1;
    s.weight[0] = hy * hx;
    s.weight[1] = hy * lx;
    s.weight[2] = ly * hx;
    s.weight[3] = ly * lx;
    return s;
}

// The sample of one channel plane at `s`, in torchvision's order: the corners' weighted sum, then the mask. The four
// loads are issued unconditionally (an outside corner reads the plane's first element, then counts as zero), so that
// the loads of many samples are in flight at once.
__device__ __forceinline__ float blend(float const (&corner)[4], SamplePoint const& s)
{
    float value = 0.0F;
#pragma unroll
    for (int q = 0; q < 4; ++q)
    {
        if (s.corner[q] >= 0)
        {
            value += s.weight[q] * corner[q];
        }
    }
    return s.mask * value;
}

template <typename T>
__device__ __forceinline__ float sampleAt(T const* plane, SamplePoint const& s)
{
    float corner[4];
#pragma unroll
    for (int q = 0; q < 4; ++q)
    {
        corner[q] = toFloat(plane[s.corner[q] > 0 ? s.corner[q] : 0]);
    }
    return blend(corner, s);
}

// The four corners' runs of RUN consecutive channels at `s` in a channels-last image (`pixels` at the run's first
// channel, `channels` elements a pixel), in 16-byte loads, all issued before any is used (an outside corner reads
// pixel 0, then counts as zero).
template <typename T, int RUN>
struct CornerRuns
{
    static constexpr int kVec = 16 / static_cast<int>(sizeof(T));
    static_assert(RUN % kVec == 0, "a run is whole 16-byte vectors");
    Vec<T, kVec> v[4][RUN / kVec];
};

template <typename T, int RUN>
__device__ __forceinline__ void loadCornerRuns(
    T const* pixels, int channels, SamplePoint const& s, CornerRuns<T, RUN>& runs)
{
    using Runs = CornerRuns<T, RUN>;
    using Load = Vec<T, Runs::kVec>;
#pragma unroll
    for (int q = 0; q < 4; ++q)
    {
        auto const* run = reinterpret_cast<Load const*>(
            pixels + static_cast<int64_t>(s.corner[q] > 0 ? s.corner[q] : 0) * channels);
#pragma unroll
        for (int v = 0; v < RUN / Runs::kVec; ++v)
        {
            runs.v[q][v] = run[v];
        }
    }
}

// Each channel of `runs` summed as sampleAt sums it.
template <typename T, int RUN>
__device__ __forceinline__ void blendCornerRuns(
    CornerRuns<T, RUN> const& runs, SamplePoint const& s, float (&samples)[RUN])
{
    constexpr int kVec = CornerRuns<T, RUN>::kVec;
#pragma unroll
    for (int j = 0; j < RUN; ++j)
    {
        float const values[4] = {toFloat(runs.v[0][j / kVec].v[j % kVec]), toFloat(runs.v[1][j / kVec].v[j % kVec]),
            toFloat(runs.v[2][j / kVec].v[j % kVec]), toFloat(runs.v[3][j / kVec].v[j % kVec])};
        samples[j] = blend(values, s);
    }
}

// (O, C / groups, kh, kw) -> (O, kh, kw, C / groups): the weight in the GEMM's K order (tap-major), so that a
// chunk's k's of one output channel are consecutive elements (16-byte copies) rather than a tap's stride apart.
template <typename T>
__global__ void toTapMajorKernel(T const* weight, T* output, int64_t total, int groupChannels, int taps)
{
    int64_t const depth = static_cast<int64_t>(groupChannels) * taps;
    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
        i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    {
        int64_t const column = i / depth;
        int const k = static_cast<int>(i - column * depth);
        int const tap = k / groupChannels;
        output[i] = weight[column * depth + static_cast<int64_t>(k - tap * groupChannels) * taps + tap];
    }
}

// 16 bytes from global to shared memory without passing through registers (cp.async, sm_80 and later); zeros where
// `inside` is false (nothing is read from `from` then).
__device__ __forceinline__ void copyAsync16(void* to, void const* from, bool inside)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    auto const address = static_cast<unsigned>(__cvta_generic_to_shared(to));
    int const bytes = inside ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(address), "l"(from), "r"(bytes) : "memory");
#else
    *static_cast<uint4*>(to) = inside ? *static_cast<uint4 const*>(from) : make_uint4(0, 0, 0, 0);
#endif
}

__device__ __forceinline__ void commitCopies()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

__device__ __forceinline__ void waitCopies()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group 0;" ::: "memory");
#endif
}

// An output pixel of GEMM row `row` (image, pixel within it, the input coordinates of its kernel window's origin);
// `valid` false past the last row (image and pixel 0 then, so that reads stay inside the tensors).
struct OutputPixel
{
    int image, pixel;
    float baseY, baseX;
    bool valid;
};

__device__ __forceinline__ OutputPixel outputPixel(Problem const& p, int64_t row)
{
    OutputPixel out{0, 0, 0.0F, 0.0F, row < p.rows};
    if (out.valid)
    {
        out.image = static_cast<int>(row / p.pixels);
        out.pixel = static_cast<int>(row - static_cast<int64_t>(out.image) * p.pixels);
    }
    int const outY = out.pixel / p.outW;
    out.baseY = static_cast<float>(outY * p.strideH - p.padH);
    out.baseX = static_cast<float>((out.pixel - outY * p.outW) * p.strideW - p.padW);
    return out;
}

// The sampling point of kernel tap `tap` and offset group `offsetGroup` at `out`: its offset and mask read here.
template <typename T>
__device__ __forceinline__ SamplePoint tapPoint(
    Problem const& p, T const* offset, T const* mask, OutputPixel const& out, int tap, int offsetGroup)
{
    int64_t const site = (static_cast<int64_t>(out.image) * p.offsetGroups + offsetGroup) * p.taps + tap;
    T const* displacement = offset + site * 2 * p.pixels + out.pixel;
    int const tapY = tap / p.kernelW;
    float const y = out.baseY + static_cast<float>(tapY * p.dilationH) + toFloat(displacement[0]);
    float const x
        = out.baseX + static_cast<float>((tap - tapY * p.kernelW) * p.dilationW) + toFloat(displacement[p.pixels]);
    return samplePoint(y, x, p.height, p.width, p.useMask ? toFloat(mask[site * p.pixels + out.pixel]) : 1.0F);
}

// A fragment of fp32 values split into its TF32 rounding (left in `big`) and the TF32 rounding of the remainder.
template <typename Fragment>
__device__ __forceinline__ void splitTf32(Fragment& big, Fragment& small)
{
#pragma unroll
    for (int e = 0; e < big.num_elements; ++e)
    {
        float const rounded = wmma::__float_to_tf32(big.x[e]);
        small.x[e] = wmma::__float_to_tf32(big.x[e] - rounded);
        big.x[e] = rounded;
    }
}

template <typename T, int FRAGS_N>
using Accumulators = wmma::fragment<wmma::accumulator, 16, 16, MmaTraits<T>::kK, float>[2][FRAGS_N];

template <typename Fragments>
__device__ __forceinline__ void zeroAccumulators(Fragments& acc)
{
#pragma unroll
    for (auto& row : acc)
    {
#pragma unroll
        for (auto& fragment : row)
        {
            wmma::fill_fragment(fragment, 0.0F);
        }
    }
}

// A block's place in the GEMM: BM rows (output pixels, across images) x BN columns (output channels) of weight group
// blockIdx.z; its NT threads' warps tiled as (BM / 32) x (NT / 32 / (BM / 32)), each warp 32 rows and an equal share
// of the columns, in 16 x 16 fragments.
template <int BM, int BN, int NT>
struct BlockTile
{
    static constexpr int kWarpsM = BM / 32;
    static constexpr int kWarpsN = NT / kWarpSize / kWarpsM;
    static constexpr int kFragsN = BN / kWarpsN / 16;

    int group = static_cast<int>(blockIdx.z);
    int64_t rowBase = static_cast<int64_t>(blockIdx.x) * BM;
    int columnBase = static_cast<int>(blockIdx.y) * BN;
    int warpRow = static_cast<int>(threadIdx.x) / kWarpSize % kWarpsM * 32;
    int warpColumn = static_cast<int>(threadIdx.x) / kWarpSize / kWarpsM * (BN / kWarpsN);
};

// acc += the chunk's samples (tileA: column-major [k][row], or row-major [row][k] with ROW_MAJOR_A; LDA) x weights
// (tileB, column-major [column][k], LDB), for the warp's 32 rows from warpRow and FRAGS_N 16-column fragments from
// warpColumn.
template <typename T, int LDA, int LDB, int FRAGS_N, bool ROW_MAJOR_A = false>
__device__ __forceinline__ void multiplyChunk(
    T const* tileA, T const* tileB, int warpRow, int warpColumn, Accumulators<T, FRAGS_N>& acc)
{
    using Traits = MmaTraits<T>;
    constexpr int kLdA = LDA;
    constexpr int kLdB = LDB;
    constexpr int kFragsN = FRAGS_N;
    using LayoutA = std::conditional_t<ROW_MAJOR_A, wmma::row_major, wmma::col_major>;
#pragma unroll
    for (int ks = 0; ks < kChunk; ks += Traits::kK)
    {
        using Operand = typename Traits::Operand;
        wmma::fragment<wmma::matrix_a, 16, 16, Traits::kK, Operand, LayoutA> a[2];
        wmma::fragment<wmma::matrix_b, 16, 16, Traits::kK, Operand, wmma::col_major> b[kFragsN];
#pragma unroll
        for (int i = 0; i < 2; ++i)
        {
            int const row = warpRow + i * 16;
            wmma::load_matrix_sync(a[i], ROW_MAJOR_A ? tileA + row * kLdA + ks : tileA + ks * kLdA + row, kLdA);
        }
#pragma unroll
        for (int j = 0; j < kFragsN; ++j)
        {
            wmma::load_matrix_sync(b[j], tileB + (warpColumn + j * 16) * kLdB + ks, kLdB);
        }
        if constexpr (Traits::kSplit)
        {
            wmma::fragment<wmma::matrix_a, 16, 16, Traits::kK, Operand, LayoutA> aSmall[2];
            wmma::fragment<wmma::matrix_b, 16, 16, Traits::kK, Operand, wmma::col_major> bSmall[kFragsN];
#pragma unroll
            for (int i = 0; i < 2; ++i)
            {
                splitTf32(a[i], aSmall[i]);
            }
#pragma unroll
            for (int j = 0; j < kFragsN; ++j)
            {
                splitTf32(b[j], bSmall[j]);
            }
#pragma unroll
            for (int i = 0; i < 2; ++i)
            {
#pragma unroll
                for (int j = 0; j < kFragsN; ++j)
                {
                    // The small products first: they would vanish next to the large one's running sum.
                    wmma::mma_sync(acc[i][j], aSmall[i], b[j], acc[i][j]);
                    wmma::mma_sync(acc[i][j], a[i], bSmall[j], acc[i][j]);
                    wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
                }
            }
        }
        else
        {
#pragma unroll
            for (int i = 0; i < 2; ++i)
            {
#pragma unroll
                for (int j = 0; j < kFragsN; ++j)
                {
                    wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
                }
            }
        }
    }
}

// The block's BM x BN results plus the bias into the (N, O, out_h, out_w) output, through `tileC` (shared memory no
// longer read by any product).
template <typename T, int BM, int BN, int NT>
__device__ __forceinline__ void storeResult(float* tileC, BlockTile<BM, BN, NT> const& tile,
    Accumulators<T, BlockTile<BM, BN, NT>::kFragsN>& acc, T const* bias, T* output, Problem const& p)
{
    constexpr int kLdC = BM + 4; // column-major: [column][row], rows contiguous as in the output
    constexpr int kFragsN = BlockTile<BM, BN, NT>::kFragsN;
    int const warpRow = tile.warpRow;
    int const warpColumn = tile.warpColumn;
    int64_t const rowBase = tile.rowBase;
    int const columnBase = tile.columnBase;
    int const group = tile.group;
#pragma unroll
    for (int i = 0; i < 2; ++i)
    {
#pragma unroll
        for (int j = 0; j < kFragsN; ++j)
        {
            wmma::store_matrix_sync(
                tileC + (warpColumn + j * 16) * kLdC + warpRow + i * 16, acc[i][j], kLdC, wmma::mem_col_major);
        }
    }
    __syncthreads();
    for (int i = static_cast<int>(threadIdx.x); i < BN * BM; i += NT)
    {
        int const column = i / BM;
        int const r = i - column * BM;
        int64_t const outRow = rowBase + r;
        if (outRow < p.rows && columnBase + column < p.groupOutChannels)
        {
            int const outChannel = group * p.groupOutChannels + columnBase + column;
            int64_t const outImage = outRow / p.pixels;
            int64_t const outPixel = outRow - outImage * p.pixels;
            output[(outImage * p.outChannels + outChannel) * p.pixels + outPixel]
                = fromFloat<T>(tileC[column * kLdC + r] + toFloat(bias[outChannel]));
        }
    }
}

// One block of NT threads computes a BlockTile: BM output pixels x BN output channels of one weight group.
// K runs tap-major (k = tap * C / groups + channel), so the kChunk k's of a chunk mostly share one tap: each thread
// computes its pixel's sampling point once per tap (and offset group) and samples every channel with it. The next
// chunk's samples and weights are read into registers before the current chunk's products, so their loads overlap
// the tensor-core work.
template <typename T, int BM, int BN, int NT>
__global__ void __launch_bounds__(NT, 2) deformConv2dKernel(
    T const* input, T const* weight, T const* offset, T const* mask, T const* bias, T* output, Problem p)
{
    using Tile = BlockTile<BM, BN, NT>;
    constexpr int kFragsN = Tile::kFragsN;
    constexpr int kLdA = BM + kPad;     // samples, column-major: [k][row]
    constexpr int kLdB = kChunk + kPad; // weights, column-major: [column][k]
    constexpr int kTileBytes = (kChunk * kLdA + BN * kLdB) * static_cast<int>(sizeof(T));
    constexpr int kResultBytes = BN * (BM + 4) * static_cast<int>(sizeof(float));
    static_assert(NT % kChunk == 0 && (BN * kChunk) % NT == 0 && (BM * kChunk) % NT == 0, "tile");
    __shared__ __align__(128) unsigned char shared[kTileBytes > kResultBytes ? kTileBytes : kResultBytes];
    T* tileA = reinterpret_cast<T*>(shared);
    T* tileB = tileA + kChunk * kLdA;
    auto* tileC = reinterpret_cast<float*>(shared); // reused once the last product has read the tiles

    Tile const tile;
    int const group = tile.group;
    int64_t const rowBase = tile.rowBase;
    int const columnBase = tile.columnBase;

    // Each thread samples one pixel (tile row) for every kStep-th k of a chunk ...
    constexpr int kStep = NT / BM;
    constexpr int kSamples = kChunk / kStep;
    int const sampleRow = static_cast<int>(threadIdx.x) % BM;
    int const sampleFirst = static_cast<int>(threadIdx.x) / BM;
    // ... and reads one k of the weight tile (the same kk for every column it reads, as NT % kChunk == 0).
    constexpr int kWeights = BN * kChunk / NT;
    int const weightK = static_cast<int>(threadIdx.x) % kChunk;
    int const weightColumn = static_cast<int>(threadIdx.x) / kChunk;
    constexpr int kWeightColumnStep = NT / kChunk;

    OutputPixel const out = outputPixel(p, rowBase + sampleRow);
    bool const rowValid = out.valid;
    int const image = out.image;
    int64_t const planeSize = static_cast<int64_t>(p.height) * p.width;
    T const* imagePlanes = input + (static_cast<int64_t>(image) * p.channels + group * p.groupChannels) * planeSize;
    T const* groupWeight = weight + static_cast<int64_t>(group) * p.groupOutChannels * p.depth;

    SamplePoint point{};
    int pointKey = -1; // tap * offset_groups + offset group of `point`
    float samples[kSamples];
    T weights[kWeights];
    auto updatePoint = [&](int tap, int offsetGroup)
    {
        int const key = tap * p.offsetGroups + offsetGroup;
        if (key == pointKey)
        {
            return;
        }
        point = tapPoint(p, offset, mask, out, tap, offsetGroup);
        pointKey = key;
    };
    // Whole taps per chunk (C / groups a multiple of kChunk, one offset group): every k of a chunk has the same tap,
    // so the point is settled before the samples, whose loads then go out together.
    bool const wholeTaps = p.groupChannels % kChunk == 0 && p.offsetGroups == 1;
    auto readChunk = [&](int k0)
    {
        if (wholeTaps)
        {
            int const tap = k0 / p.groupChannels;
            updatePoint(tap, 0);
            T const* planes = imagePlanes + static_cast<int64_t>(k0 - tap * p.groupChannels + sampleFirst) * planeSize;
#pragma unroll
            for (int j = 0; j < kSamples; ++j)
            {
                samples[j] = rowValid ? sampleAt(planes + static_cast<int64_t>(j * kStep) * planeSize, point) : 0.0F;
            }
        }
        else
        {
#pragma unroll
            for (int j = 0; j < kSamples; ++j)
            {
                int const k = k0 + sampleFirst + j * kStep;
                float value = 0.0F;
                if (rowValid && k < p.depth)
                {
                    int const tap = k / p.groupChannels;
                    int const channel = k - tap * p.groupChannels;
                    updatePoint(
                        tap, p.offsetGroups == 1 ? 0 : (group * p.groupChannels + channel) / p.offsetGroupChannels);
                    value = sampleAt(imagePlanes + channel * planeSize, point);
                }
                samples[j] = value;
            }
        }
        int const k = k0 + weightK;
        bool const kInside = k < p.depth;
        int const tap = kInside ? k / p.groupChannels : 0;
        int64_t const weightIndex = static_cast<int64_t>(k - tap * p.groupChannels) * p.taps + tap;
#pragma unroll
        for (int j = 0; j < kWeights; ++j)
        {
            int const column = columnBase + weightColumn + j * kWeightColumnStep;
            weights[j] = kInside && column < p.groupOutChannels
                             ? groupWeight[static_cast<int64_t>(column) * p.depth + weightIndex]
                             : fromFloat<T>(0.0F);
        }
    };
    auto storeChunk = [&]()
    {
#pragma unroll
        for (int j = 0; j < kSamples; ++j)
        {
            tileA[(sampleFirst + j * kStep) * kLdA + sampleRow] = fromFloat<T>(samples[j]);
        }
#pragma unroll
        for (int j = 0; j < kWeights; ++j)
        {
            tileB[(weightColumn + j * kWeightColumnStep) * kLdB + weightK] = weights[j];
        }
    };

    Accumulators<T, kFragsN> acc;
    zeroAccumulators(acc);

    readChunk(0);
    for (int k0 = 0; k0 < p.depth; k0 += kChunk)
    {
        storeChunk();
        __syncthreads();
        if (k0 + kChunk < p.depth)
        {
            readChunk(k0 + kChunk);
        }
        multiplyChunk<T, kLdA, kLdB, kFragsN>(tileA, tileB, tile.warpRow, tile.warpColumn, acc);
        __syncthreads();
    }

    storeResult(tileC, tile, acc, bias, output, p);
}

// Tactic 2: the channels-last path in two shared-memory stages. A block computes BM output pixels x BN output channels
// of weight group blockIdx.z as deformConv2dKernel does, from the channels-last input and the tap-major weight (both
// in the workspace; whole taps per chunk, so K is a multiple of kChunk). The samples tile is row-major ([row][k]): the
// kStep threads of a row are adjacent lanes, so a warp's corner loads touch kStep times fewer lines than with a row a
// lane, and each thread stores its run as vectors. The next chunk's weight tile is copied into the other stage with
// cp.async and its corner runs loaded into registers before the current chunk's products; they are blended into
// samples after them. One barrier a chunk.
template <typename T, int BM, int BN, int NT>
__global__ void __launch_bounds__(NT, 2) deformConv2dPipelinedKernel(
    T const* channelsLast, T const* tapMajorWeight, T const* offset, T const* mask, T const* bias, T* output, Problem p)
{
    using Tile = BlockTile<BM, BN, NT>;
    constexpr int kFragsN = Tile::kFragsN;
    constexpr int kLdA = kChunk + kPad; // samples, row-major: [row][k]
    constexpr int kLdB = kChunk + kPad; // weights, column-major: [column][k]
    constexpr int kTileAElements = BM * kLdA;
    constexpr int kStageElements = kTileAElements + BN * kLdB;
    constexpr int kStep = NT / BM;       // threads a tile row
    constexpr int kRun = kChunk / kStep; // consecutive channels a thread samples a chunk
    constexpr int kVec = 16 / static_cast<int>(sizeof(T));
    constexpr int kColumnVectors = kChunk / kVec;
    constexpr int kWeightVectors = BN * kColumnVectors / NT;
    static_assert(NT % BM == 0 && kChunk % kStep == 0 && (BN * kColumnVectors) % NT == 0, "tile");
    static_assert((kStageElements * sizeof(T)) % 128 == 0 && (kTileAElements * sizeof(T)) % 32 == 0, "alignment");
    extern __shared__ __align__(128) unsigned char dynamicShared[];
    T* const stages = reinterpret_cast<T*>(dynamicShared);
    auto* const tileC = reinterpret_cast<float*>(dynamicShared); // reused once the last product has read the stages

    int const tid = static_cast<int>(threadIdx.x);
    Tile const tile;
    int const group = tile.group;
    int64_t const rowBase = tile.rowBase;
    int const columnBase = tile.columnBase;
    int const sampleRow = tid / kStep;
    int const sampleFirst = tid % kStep * kRun;

    OutputPixel const out = outputPixel(p, rowBase + sampleRow);
    T const* const imagePixels = channelsLast + static_cast<int64_t>(out.image) * p.height * p.width * p.channels
                                 + group * p.groupChannels + sampleFirst;
    T const* const groupWeight = tapMajorWeight + static_cast<int64_t>(group) * p.groupOutChannels * p.depth;

    auto copyWeights = [&](int k0, T* tileB)
    {
#pragma unroll
        for (int j = 0; j < kWeightVectors; ++j)
        {
            int const v = tid + j * NT;
            int const column = v / kColumnVectors;
            int const part = v - column * kColumnVectors;
            bool const inside = columnBase + column < p.groupOutChannels;
            T const* from = inside
                                ? groupWeight + static_cast<int64_t>(columnBase + column) * p.depth + k0 + part * kVec
                                : groupWeight;
            copyAsync16(tileB + column * kLdB + part * kVec, from, inside);
        }
        commitCopies();
    };
    SamplePoint point{{-1, -1, -1, -1}, {0.0F, 0.0F, 0.0F, 0.0F}, 0.0F}; // zeros past the last row
    int pointTap = -1;
    CornerRuns<T, kRun> corners;
    auto loadChunk = [&](int k0)
    {
        int const tap = k0 / p.groupChannels;
        if (tap != pointTap && out.valid)
        {
            point = tapPoint(p, offset, mask, out, tap, 0);
        }
        pointTap = tap;
        loadCornerRuns(imagePixels + (k0 - tap * p.groupChannels), p.channels, point, corners);
    };
    auto storeSamples = [&](T* tileA)
    {
        float samples[kRun];
        blendCornerRuns(corners, point, samples);
        auto* run = reinterpret_cast<Vec<T, kVec>*>(tileA + sampleRow * kLdA + sampleFirst);
#pragma unroll
        for (int v = 0; v < kRun / kVec; ++v)
        {
            Vec<T, kVec> packed;
#pragma unroll
            for (int e = 0; e < kVec; ++e)
            {
                packed.v[e] = fromFloat<T>(samples[v * kVec + e]);
            }
            run[v] = packed;
        }
    };

    Accumulators<T, kFragsN> acc;
    zeroAccumulators(acc);
    int const chunks = p.depth / kChunk;
    copyWeights(0, stages + kTileAElements);
    loadChunk(0);
    for (int c = 0; c < chunks; ++c)
    {
        T* const tileA = stages + (c & 1) * kStageElements;
        storeSamples(tileA);
        waitCopies();
        __syncthreads();
        if (c + 1 < chunks)
        {
            copyWeights((c + 1) * kChunk, stages + ((c + 1) & 1) * kStageElements + kTileAElements);
            loadChunk((c + 1) * kChunk);
        }
        multiplyChunk<T, kLdA, kLdB, kFragsN, true>(tileA, tileA + kTileAElements, tile.warpRow, tile.warpColumn, acc);
    }
    __syncthreads();
    storeResult(tileC, tile, acc, bias, output, p);
}

template <typename T, int BM, int BN, int NT>
cudaError_t launchTile(sdk::LaunchArgs const& a, Problem const& p)
{
    int64_t const rowBlocks = (p.rows + BM - 1) / BM;
    int64_t const columnBlocks = (p.groupOutChannels + BN - 1) / BN;
    if (rowBlocks > std::numeric_limits<int32_t>::max() || columnBlocks > 65535 || p.groups > 65535)
    {
        return cudaErrorInvalidValue;
    }
    dim3 const grid(
        static_cast<unsigned>(rowBlocks), static_cast<unsigned>(columnBlocks), static_cast<unsigned>(p.groups));
    deformConv2dKernel<T, BM, BN, NT><<<grid, NT, 0, a.stream>>>(static_cast<T const*>(a.inputs[0].data),
        static_cast<T const*>(a.inputs[1].data), static_cast<T const*>(a.inputs[2].data),
        static_cast<T const*>(a.inputs[3].data), static_cast<T const*>(a.inputs[4].data),
        static_cast<T*>(a.outputs[0].data), p);
    return cudaGetLastError();
}

// Where the input is sampled from.
enum class Sampling
{
    kPLANES,        // the NCHW input, one scattered load per corner and channel (deformConv2dKernel)
    kCHANNELS_LAST, // copies in the workspace (deformConv2dPipelinedKernel), where they apply; else the planes
};

// The workspace: the channels-last copy of the input, then (256-byte aligned) the tap-major weight, where the
// channels-last path applies: whole taps per chunk, and every corner run's start (the group's first channel, a
// pixel's stride of C) on a 16-byte boundary. Empty elsewhere.
struct Workspace
{
    int64_t weightOffset = 0;
    int64_t bytes = 0;
};

Workspace workspaceOf(Problem const& p, int64_t elementSize)
{
    bool const applies = p.groupChannels % kChunk == 0 && p.offsetGroups == 1 && p.groupChannels * elementSize % 16 == 0
                         && p.channels * elementSize % 16 == 0;
    if (!applies)
    {
        return {};
    }
    int64_t const channelsLastBytes = static_cast<int64_t>(p.batch) * p.channels * p.height * p.width * elementSize;
    int64_t const weightOffset = (channelsLastBytes + 255) / 256 * 256;
    return {weightOffset, weightOffset + static_cast<int64_t>(p.outChannels) * p.depth * elementSize};
}

// The channels-last copy of the input and the tap-major weight, written to the workspace on the launch's stream; the
// copy, or null where that path does not apply or the workspace cannot hold them (the planes path then runs).
template <typename T>
T const* workspaceCopies(sdk::LaunchArgs const& a, Problem const& p, T const*& tapMajor, cudaError_t& err)
{
    Workspace const w = workspaceOf(p, sizeof(T));
    if (w.bytes == 0 || a.workspace == nullptr || a.workspaceSize < static_cast<size_t>(w.bytes)
        || reinterpret_cast<uintptr_t>(a.workspace) % 16 != 0
        || !channelsLastFits(p.batch, p.channels, static_cast<int64_t>(p.height) * p.width))
    {
        return nullptr;
    }
    auto* copy = static_cast<T*>(a.workspace);
    toChannelsLast(static_cast<T const*>(a.inputs[0].data), copy, p.batch, p.channels, p.height * p.width, a.stream);
    auto* weight = reinterpret_cast<T*>(static_cast<unsigned char*>(a.workspace) + w.weightOffset);
    int64_t const total = static_cast<int64_t>(p.outChannels) * p.depth;
    auto const blocks = static_cast<unsigned>(std::min<int64_t>((total + 255) / 256, 4096));
    toTapMajorKernel<T>
        <<<blocks, 256, 0, a.stream>>>(static_cast<T const*>(a.inputs[1].data), weight, total, p.groupChannels, p.taps);
    tapMajor = weight;
    err = cudaGetLastError();
    return copy;
}

template <typename T, int BM, int BN, int NT>
cudaError_t launchPipelined(sdk::LaunchArgs const& a, Problem const& p, T const* channelsLast, T const* tapMajor)
{
    int64_t const rowBlocks = (p.rows + BM - 1) / BM;
    int64_t const columnBlocks = (p.groupOutChannels + BN - 1) / BN;
    if (rowBlocks > std::numeric_limits<int32_t>::max() || columnBlocks > 65535 || p.groups > 65535)
    {
        return cudaErrorInvalidValue;
    }
    constexpr int kStageBytes = (BM + BN) * (kChunk + kPad) * static_cast<int>(sizeof(T));
    constexpr int kResultBytes = BN * (BM + 4) * static_cast<int>(sizeof(float));
    constexpr int kBytes = 2 * kStageBytes > kResultBytes ? 2 * kStageBytes : kResultBytes;
    auto* const kernel = deformConv2dPipelinedKernel<T, BM, BN, NT>;
    if (kBytes > 48 * 1024)
    {
        if (cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
            err != cudaSuccess)
        {
            return err;
        }
    }
    dim3 const grid(
        static_cast<unsigned>(rowBlocks), static_cast<unsigned>(columnBlocks), static_cast<unsigned>(p.groups));
    kernel<<<grid, NT, kBytes, a.stream>>>(channelsLast, tapMajor, static_cast<T const*>(a.inputs[2].data),
        static_cast<T const*>(a.inputs[3].data), static_cast<T const*>(a.inputs[4].data),
        static_cast<T*>(a.outputs[0].data), p);
    return cudaGetLastError();
}

// Whether a grid of 64 x 64 tiles covers every SM less than twice (e.g. one image of 64 x 64): 32-row tiles then.
cudaError_t smallProblem(Problem const& p, bool& small)
{
    int sms = 0;
    if (cudaError_t err = currentDeviceAttribute(cudaDevAttrMultiProcessorCount, &sms); err != cudaSuccess)
    {
        return err;
    }
    int64_t const blocks = (p.rows + 63) / 64 * ((p.groupOutChannels + 63) / 64) * p.groups;
    small = blocks < 2 * static_cast<int64_t>(sms);
    return cudaSuccess;
}

template <typename T>
cudaError_t launch(sdk::LaunchArgs const& a, Problem const& p, Sampling sampling)
{
    T const* channelsLast = nullptr;
    T const* tapMajor = nullptr;
    if (sampling == Sampling::kCHANNELS_LAST)
    {
        cudaError_t err = cudaSuccess;
        channelsLast = workspaceCopies<T>(a, p, tapMajor, err);
        if (err != cudaSuccess)
        {
            return err;
        }
    }
    bool small = false;
    if (p.groupOutChannels < 128)
    {
        if (cudaError_t err = smallProblem(p, small); err != cudaSuccess)
        {
            return err;
        }
    }
    if (channelsLast != nullptr)
    {
        if (p.groupOutChannels >= 128)
        {
            return launchPipelined<T, 64, 128, 256>(a, p, channelsLast, tapMajor);
        }
        return small ? launchPipelined<T, 32, 64, 128>(a, p, channelsLast, tapMajor)
                     : launchPipelined<T, 64, 64, 256>(a, p, channelsLast, tapMajor);
    }
    if (p.groupOutChannels >= 128)
    {
        return launchTile<T, 64, 128, 256>(a, p);
    }
    return small ? launchTile<T, 32, 64, 128>(a, p) : launchTile<T, 64, 64, 256>(a, p);
}

bool fitsInt(int64_t v)
{
    return v >= 0 && v <= std::numeric_limits<int32_t>::max();
}

// The launch arguments checked and read into `p`; cudaErrorInvalidValue where they do not describe a deform_conv2d.
cudaError_t readProblem(sdk::LaunchArgs const& a, Problem& p)
{
    namespace fields = torchvision::fields::deform_conv2d;
    if (a.nbInputs != 5 || a.nbOutputs != 1 || a.nbScalars != fields::kNB_SCALARS)
    {
        return cudaErrorInvalidValue;
    }
    double const strideH = a.scalars[fields::kSTRIDE_H];
    double const strideW = a.scalars[fields::kSTRIDE_W];
    double const padH = a.scalars[fields::kPAD_H];
    double const padW = a.scalars[fields::kPAD_W];
    double const dilationH = a.scalars[fields::kDILATION_H];
    double const dilationW = a.scalars[fields::kDILATION_W];
    double const groups = a.scalars[fields::kGROUPS];
    double const offsetGroups = a.scalars[fields::kOFFSET_GROUPS];
    bool const useMask = a.scalars[fields::kUSE_MASK] != 0.0;

    sdk::Tensor const& input = a.inputs[0];
    sdk::Tensor const& weight = a.inputs[1];
    sdk::Tensor const& offset = a.inputs[2];
    sdk::Tensor const& mask = a.inputs[3];
    sdk::Tensor const& bias = a.inputs[4];
    sdk::Tensor const& out = a.outputs[0];
    // A SymInt that reached the plugin as a shape input holds kSHAPE_INPUT_MARKER (negative): rejected with the rest.
    for (double const v : {strideH, strideW, dilationH, dilationW, groups, offsetGroups})
    {
        if (!(v >= 1.0 && v <= 65535.0))
        {
            return cudaErrorInvalidValue;
        }
    }
    if (!(padH >= 0.0 && padH <= 65535.0 && padW >= 0.0 && padW <= 65535.0))
    {
        return cudaErrorInvalidValue;
    }
    if (input.rank != 4 || weight.rank != 4 || offset.rank != 4 || bias.rank != 1 || out.rank != 4)
    {
        return cudaErrorInvalidValue;
    }
    for (sdk::Tensor const* t : {&weight, &offset, &mask, &bias, &out})
    {
        if (t->dtype != input.dtype)
        {
            return cudaErrorInvalidValue;
        }
    }
    for (int d = 0; d < 4; ++d)
    {
        if (!fitsInt(input.dims[d]) || !fitsInt(weight.dims[d]) || !fitsInt(out.dims[d]))
        {
            return cudaErrorInvalidValue;
        }
    }
    p = Problem{};
    p.batch = static_cast<int>(input.dims[0]);
    p.channels = static_cast<int>(input.dims[1]);
    p.height = static_cast<int>(input.dims[2]);
    p.width = static_cast<int>(input.dims[3]);
    p.outChannels = static_cast<int>(weight.dims[0]);
    p.kernelH = static_cast<int>(weight.dims[2]);
    p.kernelW = static_cast<int>(weight.dims[3]);
    p.outH = static_cast<int>(out.dims[2]);
    p.outW = static_cast<int>(out.dims[3]);
    p.strideH = static_cast<int>(strideH);
    p.strideW = static_cast<int>(strideW);
    p.padH = static_cast<int>(padH);
    p.padW = static_cast<int>(padW);
    p.dilationH = static_cast<int>(dilationH);
    p.dilationW = static_cast<int>(dilationW);
    p.groups = static_cast<int>(groups);
    p.offsetGroups = static_cast<int>(offsetGroups);
    p.useMask = useMask;
    if (p.channels % p.groups != 0 || p.outChannels % p.groups != 0 || p.channels % p.offsetGroups != 0
        || weight.dims[1] * p.groups != p.channels)
    {
        return cudaErrorInvalidValue;
    }
    p.groupChannels = p.channels / p.groups;
    p.groupOutChannels = p.outChannels / p.groups;
    p.offsetGroupChannels = p.channels / p.offsetGroups;
    p.taps = p.kernelH * p.kernelW;
    int64_t const pixels = static_cast<int64_t>(p.outH) * p.outW;
    int64_t const depth = static_cast<int64_t>(p.groupChannels) * p.taps;
    int64_t const sites = static_cast<int64_t>(p.offsetGroups) * p.taps;
    bool const shapesAgree = out.dims[0] == p.batch && out.dims[1] == p.outChannels && offset.dims[0] == p.batch
                             && offset.dims[1] == 2 * sites && offset.dims[2] == p.outH && offset.dims[3] == p.outW
                             && bias.dims[0] == p.outChannels
                             && (!useMask
                                 || (mask.rank == 4 && mask.dims[0] == p.batch && mask.dims[1] == sites
                                     && mask.dims[2] == p.outH && mask.dims[3] == p.outW));
    if (!shapesAgree || !fitsInt(pixels) || !fitsInt(depth) || !fitsInt(sites * 2 * pixels)
        || !fitsInt(static_cast<int64_t>(p.height) * p.width))
    {
        return cudaErrorInvalidValue;
    }
    p.pixels = static_cast<int>(pixels);
    p.depth = static_cast<int>(depth);
    p.rows = static_cast<int64_t>(p.batch) * p.pixels;
    return cudaSuccess;
}

cudaError_t run(sdk::LaunchArgs const& a, Sampling sampling)
{
    Problem p;
    if (cudaError_t err = readProblem(a, p); err != cudaSuccess)
    {
        return err;
    }
    if (p.rows == 0 || p.outChannels == 0)
    {
        return cudaSuccess;
    }
    return withFloatType(a.inputs[0].dtype, [&](auto zero) { return launch<decltype(zero)>(a, p, sampling); });
}

} // namespace

size_t deformConv2dWorkspaceSize(sdk::LaunchArgs const& a)
{
    Problem p;
    if (readProblem(a, p) != cudaSuccess || p.rows == 0 || p.outChannels == 0)
    {
        return 0;
    }
    return static_cast<size_t>(workspaceOf(p, dtypeSize(a.inputs[0].dtype)).bytes);
}

// Tactic 0, the heuristic: tactic 2 (faster than the planes at every H200 benchmark shape, docs/results.md).
cudaError_t deformConv2d(sdk::LaunchArgs const& a)
{
    return run(a, Sampling::kCHANNELS_LAST);
}

cudaError_t deformConv2dPlanes(sdk::LaunchArgs const& a)
{
    return run(a, Sampling::kPLANES);
}

cudaError_t deformConv2dChannelsLast(sdk::LaunchArgs const& a)
{
    return run(a, Sampling::kCHANNELS_LAST);
}

} // namespace ttp::vision
