// The base commit's kernels, compiled in their own namespace (ttp_base) when scripts/kernel_lab/base/ holds them.
#pragma once
#ifdef TTP_LAB_BASE
#define ttp ttp_base
#include "base/masked_rows.h"
#include "base/pad_to.h"
#include "base/rms_norm.h"
#undef ttp
#endif
