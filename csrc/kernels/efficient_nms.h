// efficient_nms: NMS with a static output (NVIDIA's EfficientNMS_TRT contract), per image of a batch.
//
// Inputs:  boxes (B, N, 4) or, one box per class, (B, N, C, 4); scores (B, N, C); both fp32 or both fp16.
// Outputs: numDetections (B,) int32; detectionBoxes (B, K, 4) corners (x1, y1, x2, y2), the boxes' dtype;
//          detectionScores (B, K), the scores' dtype; detectionClasses (B, K) int32. Rows from numDetections[b]
//          on are zero.
// Candidates: the (box, class) pairs whose score is >= the threshold (raw score >= logit(threshold) with the
//          sigmoid activation), class != backgroundClass, sorted by decreasing score, ties by lower n * C + c; the
//          first kMAX_CANDIDATES of them go through the greedy NMS (a later candidate of the same class, or of any
//          class when classAgnostic, is dropped when its IoU with a kept one is >= iouThreshold); the first K kept
//          are the output. No host synchronization.
#pragma once

#include "sdk/dtypes.h"

#include <cstddef>

namespace ttp
{

// As NVIDIA's plugin: at most this many candidates per image are suppressed among (the highest scored).
constexpr int64_t kEFFICIENT_NMS_MAX_CANDIDATES = 4096;

struct EfficientNmsShape
{
    int64_t batch;
    int64_t boxes;    // N
    int64_t classes;  // C
    bool boxPerClass; // boxes (B, N, C, 4)
};

struct EfficientNmsParams
{
    float scoreThreshold; // in [0, 1], compared after the activation
    float iouThreshold;
    int64_t maxOutputBoxes;  // K
    int64_t backgroundClass; // -1 (or any value outside [0, C)): none
    bool scoreActivation;    // sigmoid
    bool classAgnostic;
    int32_t boxCoding; // 0: corners (x1, y1, x2, y2), 1: center-size (cx, cy, w, h)
};

size_t efficientNmsWorkspaceSize(EfficientNmsShape const& shape);

cudaError_t efficientNms(EfficientNmsShape const& shape, EfficientNmsParams const& params, DType dtype,
    void const* boxes, void const* scores, int32_t* numDetections, void* detectionBoxes, void* detectionScores,
    int32_t* detectionClasses, void* workspace, size_t workspaceSize, cudaStream_t stream);

} // namespace ttp
