// torchtrt::pad_to behind the SDK launcher ABI (sdk/ttp_sdk.h; declared in torchtrt_plugins/ops/pad_to.py): the eager
// op and the generic plugin both call it. A height or width that reached the plugin as a shape input holds
// kSHAPE_INPUT_MARKER, and the output's dims are the sizes either way.
#include "kernels/pad_to.h"
#include "op_fields.h"
#include "sdk/ttp_sdk.h"

#include <cmath>

namespace ttp::launchers
{
namespace
{

namespace fields = torchtrt::fields::pad_to;

bool sizeMatches(double field, int64_t dim)
{
    return field == sdk::kSHAPE_INPUT_MARKER || field == static_cast<double>(dim);
}

// An int8 output holds the fill as it is: an integer in [-128, 127] (what the fake kernel checks eagerly).
bool fillFits(double value, DType dtype)
{
    return dtype != DType::kINT8 || (value == std::nearbyint(value) && value >= -128.0 && value <= 127.0);
}

} // namespace

cudaError_t padTo(sdk::LaunchArgs const& args)
{
    if (args.nbInputs != 1 || args.nbOutputs != 1 || args.nbScalars != fields::kNB_SCALARS)
    {
        return cudaErrorInvalidValue;
    }
    sdk::Tensor const& x = args.inputs[0];
    sdk::Tensor const& y = args.outputs[0];
    bool const shapes = x.rank == 4 && y.rank == 4 && y.dims[0] == x.dims[0] && y.dims[1] == x.dims[1]
                        && sizeMatches(args.scalars[fields::kHEIGHT], y.dims[2])
                        && sizeMatches(args.scalars[fields::kWIDTH], y.dims[3]);
    if (!shapes || y.dtype != x.dtype || !fillFits(args.scalars[fields::kVALUE], x.dtype))
    {
        return cudaErrorInvalidValue;
    }
    return ::ttp::padTo(x.data, y.data, x.dims[0] * x.dims[1], x.dims[2], x.dims[3], y.dims[2], y.dims[3],
        static_cast<float>(args.scalars[fields::kVALUE]), x.dtype, args.stream);
}

} // namespace ttp::launchers
