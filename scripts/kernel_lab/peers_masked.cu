// Peer lab, masked_rows part: count + scatter as the plugin enqueues them, with and without programmatic dependent
// launches, and each half alone.
#include "../../csrc/kernels/masked_rows.cu"

extern "C"
{
    char const* lab_masked_name(int v)
    {
        static char const* const names[] = {"count+scatter", "count+scatter pdl", "count alone", "scatter alone"};
        return v >= 0 && v < 4 ? names[v] : nullptr;
    }

    // maskDtype: ttp::DType (6 bool, 4 int32).
    int lab_masked(int v, void const* x, void const* mask, int maskDtype, long long rows, long long rowBytes,
        void* workspace, void* count, void* y, void* stream)
    {
        auto const s = static_cast<cudaStream_t>(stream);
        auto const md = static_cast<ttp::DType>(maskDtype);
        bool const pdl = v == 1;
        cudaError_t err = cudaSuccess;
        if (v != 3)
            err = ttp::countImpl(mask, md, rows, rowBytes, workspace, count, ttp::DType::kINT32, s, pdl);
        if (err == cudaSuccess && v != 2)
            err = ttp::scatterImpl(x, y, rows, rowBytes, workspace, s, pdl);
        return static_cast<int>(err);
    }
}

extern "C" long long lab_masked_ws(long long rows)
{
    return static_cast<long long>(ttp::maskedRowsWorkspaceSize(rows));
}
