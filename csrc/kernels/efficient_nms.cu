#include "efficient_nms.h"
#include "suppression_bits.cuh"
#include "type_utils.cuh"

#include <cmath>
#include <cub/device/device_radix_sort.cuh>
#include <limits>

namespace ttp
{
namespace
{

using suppression::kBOXES_PER_WORD;
using suppression::wordCount;

constexpr int64_t kMAX_CANDIDATES = kEFFICIENT_NMS_MAX_CANDIDATES;
constexpr int64_t kMAX_WORDS = kMAX_CANDIDATES / kBOXES_PER_WORD;
constexpr int kKEY_THREADS = 256;
constexpr int kWALK_THREADS = 512;

size_t aligned(size_t bytes)
{
    return (bytes + 255) / 256 * 256;
}

// The sort's key bits above the score's 32: the image, so that one sort orders every image's candidates.
int batchBits(int64_t batch)
{
    int bits = 0;
    while ((int64_t{1} << bits) < batch)
    {
        ++bits;
    }
    return bits;
}

struct Layout
{
    size_t keysIn, keysOut, indexIn, indexOut, counts, candidateBoxes, candidateScores, candidateClasses, mask,
        sortTemp, total;
};

Layout layout(EfficientNmsShape const& s)
{
    int64_t const items = s.batch * s.boxes * s.classes;
    int64_t const candidates = s.batch * kMAX_CANDIDATES;
    size_t sortBytes = 0;
    cub::DeviceRadixSort::SortPairsDescending(static_cast<void*>(nullptr), sortBytes,
        static_cast<uint64_t const*>(nullptr), static_cast<uint64_t*>(nullptr), static_cast<int32_t const*>(nullptr),
        static_cast<int32_t*>(nullptr), static_cast<int>(items));
    Layout l{};
    l.keysIn = 0;
    l.keysOut = l.keysIn + aligned(items * sizeof(uint64_t));
    l.indexIn = l.keysOut + aligned(items * sizeof(uint64_t));
    l.indexOut = l.indexIn + aligned(items * sizeof(int32_t));
    l.counts = l.indexOut + aligned(items * sizeof(int32_t));
    l.candidateBoxes = l.counts + aligned(s.batch * sizeof(int32_t));
    l.candidateScores = l.candidateBoxes + aligned(candidates * sizeof(float4));
    l.candidateClasses = l.candidateScores + aligned(candidates * sizeof(float));
    l.mask = l.candidateClasses + aligned(candidates * sizeof(int32_t));
    l.sortTemp = l.mask + aligned(candidates * kMAX_WORDS * sizeof(uint64_t));
    l.total = l.sortTemp + aligned(sortBytes);
    return l;
}

// Scores as unsigned keys in the order of the floats (+0 and -0 as one); a key of 0 is no candidate.
__device__ uint32_t orderedKey(float score)
{
    uint32_t const bits = __float_as_uint(score == 0.0F ? 0.0F : score);
    return (bits & 0x80000000U) != 0 ? ~bits : bits | 0x80000000U;
}

// One image per grid row: the sort's keys (image, score) and values (n * C + c), and the image's candidate count.
template <typename T>
__global__ void __launch_bounds__(kKEY_THREADS) keyKernel(T const* scores, int64_t perImage, int64_t classes,
    int64_t batch, float threshold, int64_t backgroundClass, uint64_t* keys, int32_t* index, int32_t* counts)
{
    int64_t const image = blockIdx.y;
    int64_t const i = blockIdx.x * int64_t{kKEY_THREADS} + threadIdx.x;
    bool candidate = false;
    if (i < perImage)
    {
        float const score = toFloat(scores[image * perImage + i]);
        candidate = score >= threshold && i % classes != backgroundClass;
        uint64_t const high = static_cast<uint64_t>(batch - 1 - image) << 32;
        keys[image * perImage + i] = high | (candidate ? orderedKey(score) : 0U);
        index[image * perImage + i] = static_cast<int32_t>(i);
    }
    int const found = __syncthreads_count(candidate);
    if (threadIdx.x == 0 && found > 0)
    {
        atomicAdd(counts + image, found);
    }
}

template <typename T>
__device__ float4 loadBox(T const* box)
{
    return make_float4(toFloat(box[0]), toFloat(box[1]), toFloat(box[2]), toFloat(box[3]));
}

// The first candidates of each image (by the sort), decoded to corners, with their class and score.
template <typename T>
__global__ void gatherKernel(EfficientNmsShape shape, int32_t boxCoding, T const* boxes, T const* scores,
    int32_t const* sortedIndex, int32_t const* counts, float4* candidateBoxes, float* candidateScores,
    int32_t* candidateClasses)
{
    int64_t const image = blockIdx.y;
    int64_t const i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
    if (i >= counts[image] || i >= kMAX_CANDIDATES)
    {
        return;
    }
    int64_t const perImage = shape.boxes * shape.classes;
    int64_t const item = sortedIndex[image * perImage + i];
    int64_t const n = item / shape.classes;
    int64_t const c = item - n * shape.classes;
    int64_t const row = shape.boxPerClass ? (image * shape.boxes + n) * shape.classes + c : image * shape.boxes + n;
    float4 box = loadBox(boxes + row * 4);
    if (boxCoding == 1)
    {
        float const halfW = 0.5F * box.z;
        float const halfH = 0.5F * box.w;
        box = make_float4(box.x - halfW, box.y - halfH, box.x + halfW, box.y + halfH);
    }
    int64_t const slot = image * kMAX_CANDIDATES + i;
    candidateBoxes[slot] = box;
    candidateScores[slot] = toFloat(scores[image * perImage + item]);
    candidateClasses[slot] = static_cast<int32_t>(c);
}

// NVIDIA's IoU: on the boxes with their corners ordered, 0 when they do not intersect or have no union. Rounded
// operation by operation (no contraction), as the reference computes it.
__device__ float iou(float4 a, float4 b)
{
    float const ax1 = fminf(a.x, a.z);
    float const ax2 = fmaxf(a.x, a.z);
    float const ay1 = fminf(a.y, a.w);
    float const ay2 = fmaxf(a.y, a.w);
    float const bx1 = fminf(b.x, b.z);
    float const bx2 = fmaxf(b.x, b.z);
    float const by1 = fminf(b.y, b.w);
    float const by2 = fmaxf(b.y, b.w);
    float const left = fmaxf(ax1, bx1);
    float const right = fminf(ax2, bx2);
    float const top = fmaxf(ay1, by1);
    float const bottom = fminf(ay2, by2);
    if (left > right || top > bottom)
    {
        return 0.0F;
    }
    float const inter = __fmul_rn(__fsub_rn(right, left), __fsub_rn(bottom, top));
    if (!(inter > 0.0F))
    {
        return 0.0F;
    }
    float const areaA = __fmul_rn(__fsub_rn(ax2, ax1), __fsub_rn(ay2, ay1));
    float const areaB = __fmul_rn(__fsub_rn(bx2, bx1), __fsub_rn(by2, by1));
    float const unionArea = __fsub_rn(__fadd_rn(areaA, areaB), inter);
    if (!(unionArea > 0.0F))
    {
        return 0.0F;
    }
    return __fdiv_rn(inter, unionArea);
}

// One block per pair of 64-candidate blocks (row block <= column block) and image: bit j of word (r, c) says
// candidate 64 r + t suppresses candidate 64 c + j. Rows are kMAX_WORDS words long.
__global__ void maskKernel(float4 const* candidateBoxes, int32_t const* candidateClasses, int32_t const* counts,
    float iouThreshold, bool classAgnostic, uint64_t* mask)
{
    int64_t const image = blockIdx.y;
    int64_t const count = counts[image] < kMAX_CANDIDATES ? counts[image] : kMAX_CANDIDATES;
    int64_t rowBlock = 0;
    int64_t colBlock = 0;
    suppression::trianglePair(blockIdx.x, rowBlock, colBlock);
    if (colBlock * kBOXES_PER_WORD >= count)
    {
        return;
    }
    __shared__ float4 columnBoxes[kBOXES_PER_WORD];
    __shared__ int32_t columnClasses[kBOXES_PER_WORD];
    int64_t const base = image * kMAX_CANDIDATES;
    int64_t const column = colBlock * kBOXES_PER_WORD + threadIdx.x;
    if (column < count)
    {
        columnBoxes[threadIdx.x] = candidateBoxes[base + column];
        columnClasses[threadIdx.x] = candidateClasses[base + column];
    }
    __syncthreads();
    int64_t const row = rowBlock * kBOXES_PER_WORD + threadIdx.x;
    if (row >= count)
    {
        return;
    }
    float4 const box = candidateBoxes[base + row];
    int32_t const cls = candidateClasses[base + row];
    int64_t const columns = count - colBlock * kBOXES_PER_WORD;
    int64_t const last = columns < kBOXES_PER_WORD ? columns : kBOXES_PER_WORD;
    uint64_t bits = 0;
    for (int64_t j = rowBlock == colBlock ? threadIdx.x + 1 : 0; j < last; ++j)
    {
        if ((classAgnostic || columnClasses[j] == cls) && iou(box, columnBoxes[j]) >= iouThreshold)
        {
            bits |= uint64_t{1} << j;
        }
    }
    mask[(base + row) * kMAX_WORDS + colBlock] = bits;
}

// The lowest `limit` set bits of `bits`.
__device__ uint64_t firstBits(uint64_t bits, int64_t limit)
{
    while (__popcll(bits) > limit)
    {
        bits &= ~(uint64_t{1} << (63 - __clzll(static_cast<long long>(bits))));
    }
    return bits;
}

__device__ float sigmoid(float x)
{
    return 1.0F / (1.0F + expf(-x));
}

// The greedy walk, one block per image, 64 candidates a step: warp 0 decides a block from the bits earlier kept
// candidates set in it and from its diagonal words; then the whole block writes the kept candidates out and ORs
// their rows into the later blocks' removed bits. Stops at K kept; zeroes the rows after the last one kept.
template <typename T>
__global__ void __launch_bounds__(kWALK_THREADS) walkKernel(uint64_t const* mask, float4 const* candidateBoxes,
    float const* candidateScores, int32_t const* candidateClasses, int32_t const* counts, int64_t maxOutputBoxes,
    bool scoreActivation, int32_t* numDetections, T* detectionBoxes, T* detectionScores, int32_t* detectionClasses)
{
    __shared__ uint64_t removed[kMAX_WORDS];
    __shared__ uint64_t decided;
    int64_t const image = blockIdx.x;
    int64_t const count = counts[image] < kMAX_CANDIDATES ? counts[image] : kMAX_CANDIDATES;
    int64_t const words = wordCount(count);
    int64_t const base = image * kMAX_CANDIDATES;
    unsigned const warp = threadIdx.x / kWarpSize;
    unsigned const lane = threadIdx.x % kWarpSize;
    for (int64_t w = threadIdx.x; w < kMAX_WORDS; w += kWALK_THREADS)
    {
        removed[w] = 0;
    }
    __syncthreads();
    int64_t kept = 0;
    for (int64_t block = 0; block < words && kept < maxOutputBoxes; ++block)
    {
        int64_t const first = block * kBOXES_PER_WORD;
        if (warp == 0)
        {
            bool const low = first + lane < count;
            bool const high = first + lane + 32 < count;
            uint64_t const diagLow = low ? mask[(base + first + lane) * kMAX_WORDS + block] : 0;
            uint64_t const diagHigh = high ? mask[(base + first + lane + 32) * kMAX_WORDS + block] : 0;
            uint64_t const valid
                = count - first >= kBOXES_PER_WORD ? ~uint64_t{0} : (uint64_t{1} << (count - first)) - 1;
            uint64_t const current = suppression::decideBlock(removed[block], diagLow, diagHigh);
            if (lane == 0)
            {
                decided = firstBits(~current & valid, maxOutputBoxes - kept);
            }
        }
        __syncthreads();
        uint64_t const keptBits = decided;
        if (threadIdx.x < kBOXES_PER_WORD && ((keptBits >> threadIdx.x) & 1U) != 0)
        {
            int64_t const out = image * maxOutputBoxes + kept + __popcll(keptBits & ((uint64_t{1} << threadIdx.x) - 1));
            int64_t const slot = base + first + threadIdx.x;
            float4 const box = candidateBoxes[slot];
            float const score = candidateScores[slot];
            detectionBoxes[out * 4 + 0] = fromFloat<T>(box.x);
            detectionBoxes[out * 4 + 1] = fromFloat<T>(box.y);
            detectionBoxes[out * 4 + 2] = fromFloat<T>(box.z);
            detectionBoxes[out * 4 + 3] = fromFloat<T>(box.w);
            detectionScores[out] = fromFloat<T>(scoreActivation ? sigmoid(score) : score);
            detectionClasses[out] = candidateClasses[slot];
        }
        // Thread t ORs word block + 1 + t % 64 over the kept candidates k with k % groups == t / 64.
        constexpr int kGROUPS = kWALK_THREADS / kBOXES_PER_WORD;
        int64_t const word = block + 1 + threadIdx.x % kBOXES_PER_WORD;
        if (word < words)
        {
            uint64_t bits = 0;
            uint64_t pending = keptBits;
            for (int k = 0; pending != 0; ++k)
            {
                int const j = __ffsll(static_cast<long long>(pending)) - 1;
                pending &= pending - 1;
                if (k % kGROUPS == static_cast<int>(threadIdx.x / kBOXES_PER_WORD))
                {
                    bits |= mask[(base + first + j) * kMAX_WORDS + word];
                }
            }
            if (bits != 0)
            {
                atomicOr(reinterpret_cast<unsigned long long*>(removed + word), static_cast<unsigned long long>(bits));
            }
        }
        kept += __popcll(keptBits);
        __syncthreads();
    }
    for (int64_t k = kept + threadIdx.x; k < maxOutputBoxes; k += kWALK_THREADS)
    {
        int64_t const out = image * maxOutputBoxes + k;
        for (int d = 0; d < 4; ++d)
        {
            detectionBoxes[out * 4 + d] = fromFloat<T>(0.0F);
        }
        detectionScores[out] = fromFloat<T>(0.0F);
        detectionClasses[out] = 0;
    }
    if (threadIdx.x == 0)
    {
        numDetections[image] = static_cast<int32_t>(kept);
    }
}

// The threshold on the raw score: with the sigmoid, logit(threshold), as NVIDIA's plugin compares it.
float rawThreshold(EfficientNmsParams const& p)
{
    if (!p.scoreActivation)
    {
        return p.scoreThreshold;
    }
    if (p.scoreThreshold <= 0.0F)
    {
        return -std::numeric_limits<float>::infinity();
    }
    if (p.scoreThreshold >= 1.0F)
    {
        return std::numeric_limits<float>::infinity();
    }
    double const t = p.scoreThreshold;
    return static_cast<float>(std::log(t / (1.0 - t)));
}

template <typename T>
cudaError_t run(EfficientNmsShape const& s, EfficientNmsParams const& p, T const* boxes, T const* scores,
    int32_t* numDetections, T* detectionBoxes, T* detectionScores, int32_t* detectionClasses, uint8_t* workspace,
    Layout const& l, cudaStream_t stream)
{
    int64_t const perImage = s.boxes * s.classes;
    auto* keysIn = reinterpret_cast<uint64_t*>(workspace + l.keysIn);
    auto* keysOut = reinterpret_cast<uint64_t*>(workspace + l.keysOut);
    auto* indexIn = reinterpret_cast<int32_t*>(workspace + l.indexIn);
    auto* indexOut = reinterpret_cast<int32_t*>(workspace + l.indexOut);
    auto* counts = reinterpret_cast<int32_t*>(workspace + l.counts);
    auto* candidateBoxes = reinterpret_cast<float4*>(workspace + l.candidateBoxes);
    auto* candidateScores = reinterpret_cast<float*>(workspace + l.candidateScores);
    auto* candidateClasses = reinterpret_cast<int32_t*>(workspace + l.candidateClasses);
    auto* mask = reinterpret_cast<uint64_t*>(workspace + l.mask);
    cudaError_t err = cudaMemsetAsync(counts, 0, s.batch * sizeof(int32_t), stream);
    if (err != cudaSuccess)
    {
        return err;
    }
    auto const batch = static_cast<unsigned>(s.batch);
    if (perImage > 0)
    {
        dim3 const keyGrid(static_cast<unsigned>((perImage + kKEY_THREADS - 1) / kKEY_THREADS), batch);
        keyKernel<T><<<keyGrid, kKEY_THREADS, 0, stream>>>(
            scores, perImage, s.classes, s.batch, rawThreshold(p), p.backgroundClass, keysIn, indexIn, counts);
        size_t sortBytes = l.total - l.sortTemp;
        err = cub::DeviceRadixSort::SortPairsDescending(workspace + l.sortTemp, sortBytes, keysIn, keysOut, indexIn,
            indexOut, static_cast<int>(s.batch * perImage), 0, 32 + batchBits(s.batch), stream);
        if (err != cudaSuccess)
        {
            return err;
        }
        int64_t const candidates = perImage < kMAX_CANDIDATES ? perImage : kMAX_CANDIDATES;
        int const threads = 256;
        dim3 const gatherGrid(static_cast<unsigned>((candidates + threads - 1) / threads), batch);
        gatherKernel<T><<<gatherGrid, threads, 0, stream>>>(
            s, p.boxCoding, boxes, scores, indexOut, counts, candidateBoxes, candidateScores, candidateClasses);
        int64_t const blocks = wordCount(candidates);
        dim3 const maskGrid(static_cast<unsigned>(blocks * (blocks + 1) / 2), batch);
        maskKernel<<<maskGrid, kBOXES_PER_WORD, 0, stream>>>(
            candidateBoxes, candidateClasses, counts, p.iouThreshold, p.classAgnostic, mask);
    }
    walkKernel<T><<<batch, kWALK_THREADS, 0, stream>>>(mask, candidateBoxes, candidateScores, candidateClasses, counts,
        p.maxOutputBoxes, p.scoreActivation, numDetections, detectionBoxes, detectionScores, detectionClasses);
    return cudaGetLastError();
}

} // namespace

size_t efficientNmsWorkspaceSize(EfficientNmsShape const& shape)
{
    return layout(shape).total;
}

cudaError_t efficientNms(EfficientNmsShape const& shape, EfficientNmsParams const& params, DType dtype,
    void const* boxes, void const* scores, int32_t* numDetections, void* detectionBoxes, void* detectionScores,
    int32_t* detectionClasses, void* workspace, size_t workspaceSize, cudaStream_t stream)
{
    if (shape.batch <= 0)
    {
        return cudaSuccess;
    }
    int64_t const items = shape.batch * shape.boxes * shape.classes;
    Layout const l = layout(shape);
    if (items > std::numeric_limits<int32_t>::max() || workspace == nullptr || workspaceSize < l.total
        || params.maxOutputBoxes <= 0 || (params.boxCoding != 0 && params.boxCoding != 1))
    {
        return cudaErrorInvalidValue;
    }
    auto* base = static_cast<uint8_t*>(workspace);
    switch (dtype)
    {
    case DType::kFLOAT32:
        return run(shape, params, static_cast<float const*>(boxes), static_cast<float const*>(scores), numDetections,
            static_cast<float*>(detectionBoxes), static_cast<float*>(detectionScores), detectionClasses, base, l,
            stream);
    case DType::kFLOAT16:
        return run(shape, params, static_cast<__half const*>(boxes), static_cast<__half const*>(scores), numDetections,
            static_cast<__half*>(detectionBoxes), static_cast<__half*>(detectionScores), detectionClasses, base, l,
            stream);
    default: return cudaErrorInvalidValue;
    }
}

} // namespace ttp
