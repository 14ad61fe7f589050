#include "fuzz.h"

#include <NvInferRuntime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "fields.h"
#include "run.h"
#include "services.h"
#include "trap.h"

namespace ttp::harness
{
namespace
{

using FT = nvinfer1::PluginFieldType;

constexpr int32_t kNB_FIELD_TYPES = 14; // kFLOAT16 ... kFP4
constexpr int64_t kREPORTED_PER_CREATOR = 10;
constexpr int64_t kLARGEST_EXACT_INTEGER = int64_t{1} << 53;
constexpr int64_t kINT64_MIN = std::numeric_limits<int64_t>::min();

// A field as the creator advertises it in getFieldNames; length 0: an array of any length.
struct Advertised
{
    std::string name;
    FT type;
    int32_t length;
};

// One field of a generated collection: FieldSet's field, whose name may also be null.
struct Draft
{
    FieldSet::Field field;
    bool nullName{false};
};

struct Collection
{
    std::vector<Draft> fields;
    bool null{false};         // createPlugin gets no collection at all
    int32_t negativeCount{0}; // a negative nbFields instead of the true one
};

uint64_t splitMix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

// FNV-1a: stable across standard libraries, unlike std::hash, so that a seed replays anywhere.
uint64_t stableHash(std::string const& text)
{
    uint64_t h = 1469598103934665603ULL;
    for (unsigned char c : text)
    {
        h = (h ^ c) * 1099511628211ULL;
    }
    return h;
}

bool isIntType(FT type)
{
    return type == FT::kINT8 || type == FT::kINT16 || type == FT::kINT32 || type == FT::kINT64;
}

bool isFloatType(FT type)
{
    return type == FT::kFLOAT32 || type == FT::kFLOAT64;
}

template <typename T>
void store(uint8_t* at, T value)
{
    std::memcpy(at, &value, sizeof(T));
}

template <typename T>
T load(uint8_t const* at)
{
    T value;
    std::memcpy(&value, at, sizeof(T));
    return value;
}

void storeInt(uint8_t* at, FT type, int64_t v)
{
    switch (type)
    {
    case FT::kINT8: store(at, static_cast<int8_t>(v)); break;
    case FT::kINT16: store(at, static_cast<int16_t>(v)); break;
    case FT::kINT32: store(at, static_cast<int32_t>(v)); break;
    default: store(at, v); break;
    }
}

void storeFloat(uint8_t* at, FT type, double v)
{
    if (type == FT::kFLOAT32)
    {
        store(at, static_cast<float>(v));
    }
    else
    {
        store(at, v);
    }
}

// TensorRT's ONNX parser delivers an INT attribute as kINT32 and a FLOAT attribute as kFLOAT32 (sdk/plugin_support.cpp,
// plugin::acceptsType, cites the parser): the only stand-ins for a field's advertised type. A field advertised as
// kUNKNOWN has no one type (a declared op's weight field takes its tensor's): the plugin decides.
bool acceptedType(FT advertised, FT given)
{
    return given == advertised || advertised == FT::kUNKNOWN || (advertised == FT::kINT64 && given == FT::kINT32)
           || (advertised == FT::kFLOAT64 && given == FT::kFLOAT32);
}

class Generator
{
public:
    Generator(
        uint64_t seed, std::vector<Advertised> const& advertised, std::vector<FieldSet> const& seeds, int32_t maxLength)
        : mRng(seed)
        , mAdvertised(advertised)
        , mSeeds(seeds)
        , mMaxLength(maxLength)
    {
    }

    nvinfer1::TensorRTPhase phase()
    {
        return chance(0.5) ? nvinfer1::TensorRTPhase::kBUILD : nvinfer1::TensorRTPhase::kRUNTIME;
    }

    Collection next()
    {
        Collection c;
        uint64_t const mode = below(10);
        if (!mSeeds.empty() && mode < 6)
        {
            for (FieldSet::Field const& f : mSeeds[below(mSeeds.size())].fields())
            {
                c.fields.push_back({f, false});
            }
        }
        else if (mode < 9)
        {
            for (Advertised const& a : mAdvertised)
            {
                if (chance(0.85))
                {
                    c.fields.push_back(fromAdvertised(a));
                }
            }
        }
        else
        {
            for (uint64_t n = below(9); n > 0; --n)
            {
                c.fields.push_back(randomDraft());
            }
        }
        for (uint64_t n = chance(0.2) ? 0 : 1 + below(3); n > 0; --n)
        {
            mutate(c);
        }
        if (chance(0.02))
        {
            c.null = true;
        }
        else if (chance(0.02))
        {
            c.negativeCount = chance(0.5) ? -1 : std::numeric_limits<int32_t>::min();
        }
        return c;
    }

private:
    uint64_t below(uint64_t n)
    {
        return n == 0 ? 0 : mRng() % n;
    }
    bool chance(double p)
    {
        return std::uniform_real_distribution<double>(0.0, 1.0)(mRng) < p;
    }

    int64_t plausibleInt()
    {
        return static_cast<int64_t>(below(17));
    }
    double plausibleFloat()
    {
        return 0.25 * static_cast<double>(1 + below(8));
    }
    int64_t anyInt()
    {
        static constexpr int64_t kSPECIAL[]
            = {0, 1, -1, 2, 16, 17, 255, 256, 65536, int64_t{1} << 24, std::numeric_limits<int32_t>::min(),
                std::numeric_limits<int32_t>::max(), kINT64_MIN, kINT64_MIN + 1, std::numeric_limits<int64_t>::max(),
                kLARGEST_EXACT_INTEGER, kLARGEST_EXACT_INTEGER + 1, -kLARGEST_EXACT_INTEGER - 1};
        uint64_t const pick = below(10);
        if (pick < 5)
        {
            return static_cast<int64_t>(below(40)) - 8;
        }
        return pick < 8 ? kSPECIAL[below(std::size(kSPECIAL))] : static_cast<int64_t>(mRng());
    }
    double anyFloat()
    {
        static constexpr double kSPECIAL[] = {0.0, -0.0, 1e-6, 0.5, 1.0, -1.0, 2.0, 1e4, -1e4, 1e30, -1e30, 1e300,
            std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
            -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::denorm_min(),
            std::numeric_limits<double>::max(), std::numeric_limits<double>::lowest(), 3.4028235e38, 3.5e38};
        return chance(0.3) ? std::uniform_real_distribution<double>(-10.0, 10.0)(mRng)
                           : kSPECIAL[below(std::size(kSPECIAL))];
    }

    int32_t anyLength()
    {
        uint64_t const pick = below(20);
        if (pick < 8)
        {
            return 1;
        }
        if (pick < 10)
        {
            return 0;
        }
        if (pick < 12)
        {
            return chance(0.7) ? -1 - static_cast<int32_t>(below(8)) : std::numeric_limits<int32_t>::min();
        }
        if (pick < 17)
        {
            return 2 + static_cast<int32_t>(below(7));
        }
        return pick < 18 ? mMaxLength : 1 + static_cast<int32_t>(below(static_cast<uint64_t>(mMaxLength)));
    }

    FT anyType()
    {
        return static_cast<FT>(below(kNB_FIELD_TYPES));
    }

    // The bytes of `f.length` elements of `f.type`: plausible values (in the range of most fields) or any.
    void fill(FieldSet::Field& f, bool plausible)
    {
        f.bytes.assign(fieldBytes(f.type, f.length), 0);
        size_t const width = fieldBytes(f.type, 1);
        for (size_t at = 0; at + width <= f.bytes.size() && (isIntType(f.type) || isFloatType(f.type)); at += width)
        {
            if (isIntType(f.type))
            {
                storeInt(f.bytes.data() + at, f.type, plausible ? plausibleInt() : anyInt());
            }
            else
            {
                storeFloat(f.bytes.data() + at, f.type, plausible ? plausibleFloat() : anyFloat());
            }
        }
        if (!isIntType(f.type) && !isFloatType(f.type))
        {
            std::generate(f.bytes.begin(), f.bytes.end(), [&] { return static_cast<uint8_t>(mRng()); });
        }
    }

    Draft fromAdvertised(Advertised const& a)
    {
        Draft d;
        d.field.name = a.name;
        d.field.type = a.type;
        if (chance(0.25) && (a.type == FT::kINT64 || a.type == FT::kFLOAT64))
        {
            d.field.type = a.type == FT::kINT64 ? FT::kINT32 : FT::kFLOAT32;
        }
        d.field.length = a.length == 0 ? 1 + static_cast<int32_t>(below(64)) : a.length;
        fill(d.field, true);
        return d;
    }

    std::string anyName()
    {
        uint64_t const pick = below(10);
        if (pick < 5 && !mAdvertised.empty())
        {
            return mAdvertised[below(mAdvertised.size())].name;
        }
        if (pick < 7 && !mAdvertised.empty())
        {
            std::string typo = mAdvertised[below(mAdvertised.size())].name;
            typo.back() = typo.back() == 'x' ? 'y' : 'x';
            return typo;
        }
        return pick < 9 ? "fuzz_" + std::to_string(below(4)) : std::string();
    }

    Draft randomDraft()
    {
        Draft d;
        d.field.name = anyName();
        d.nullName = chance(0.1);
        d.field.type = anyType();
        d.field.length = anyLength();
        d.field.hasData = chance(0.95);
        fill(d.field, chance(0.5));
        return d;
    }

    void mutate(Collection& c)
    {
        uint64_t const kind = below(11);
        if (kind == 10 || c.fields.empty())
        {
            c.fields.insert(c.fields.begin() + static_cast<ptrdiff_t>(below(c.fields.size() + 1)), randomDraft());
            return;
        }
        size_t const index = below(c.fields.size());
        FieldSet::Field& f = c.fields[index].field;
        size_t const width = fieldBytes(f.type, 1);
        size_t const elements = width == 0 ? 0 : f.bytes.size() / width;
        switch (kind)
        {
        case 0:
            c.fields.insert(c.fields.begin() + static_cast<ptrdiff_t>(below(c.fields.size() + 1)), c.fields[index]);
            break;
        case 1: f.name = anyName(); break;
        case 2: c.fields[index].nullName = true; break;
        case 3:
            f.type = anyType();
            fill(f, true);
            break;
        case 4:
            f.length = anyLength();
            fill(f, true);
            break;
        case 5: f.hasData = false; break;
        case 6: // one element made extreme: NaN, an infinity, INT64_MIN, 2^53 + 1, ...
            if (elements > 0 && isIntType(f.type))
            {
                storeInt(f.bytes.data() + below(elements) * width, f.type, anyInt());
            }
            else if (elements > 0 && isFloatType(f.type))
            {
                storeFloat(f.bytes.data() + below(elements) * width, f.type, anyFloat());
            }
            break;
        case 7: c.fields.erase(c.fields.begin() + static_cast<ptrdiff_t>(index)); break;
        case 8: // an array edited as a token stream: values overwritten, or elements added or dropped
            if (isIntType(f.type) && f.length > 0)
            {
                if (chance(0.5) && elements > 0)
                {
                    for (uint64_t n = 1 + below(3); n > 0; --n)
                    {
                        storeInt(
                            f.bytes.data() + below(elements) * width, f.type, chance(0.5) ? plausibleInt() : anyInt());
                    }
                }
                else
                {
                    int64_t const delta = static_cast<int64_t>(below(7)) - 3;
                    f.length = static_cast<int32_t>(std::max<int64_t>(0, f.length + delta));
                    size_t const old = f.bytes.size();
                    f.bytes.resize(fieldBytes(f.type, f.length));
                    for (size_t at = old; at + width <= f.bytes.size(); at += width)
                    {
                        storeInt(f.bytes.data() + at, f.type, plausibleInt());
                    }
                }
            }
            break;
        default: // random bytes over the data
            for (uint64_t n = 1 + below(4); n > 0 && !f.bytes.empty(); --n)
            {
                f.bytes[below(f.bytes.size())] = static_cast<uint8_t>(mRng());
            }
            break;
        }
    }

    std::mt19937_64 mRng;
    std::vector<Advertised> const& mAdvertised;
    std::vector<FieldSet> const& mSeeds;
    int32_t mMaxLength;
};

// A defect no field table can accept (see fuzz.h), or "" where the plugin may accept or refuse.
std::string mustRefuse(Collection const& c, std::vector<Advertised> const& advertised)
{
    if (c.null)
    {
        return "";
    }
    if (c.negativeCount != 0)
    {
        return "a field count of " + std::to_string(c.negativeCount);
    }
    for (Draft const& d : c.fields)
    {
        FieldSet::Field const& f = d.field;
        if (d.nullName)
        {
            return "a field without a name";
        }
        auto const a
            = std::find_if(advertised.begin(), advertised.end(), [&](Advertised const& x) { return x.name == f.name; });
        if (a == advertised.end())
        {
            return "unknown field '" + f.name + "'";
        }
        auto const same = std::count_if(
            c.fields.begin(), c.fields.end(), [&](Draft const& x) { return !x.nullName && x.field.name == f.name; });
        std::string const field = "field '" + f.name + "'";
        if (same > 1)
        {
            return field + " given " + std::to_string(same) + " times";
        }
        if (!acceptedType(a->type, f.type))
        {
            return field + " as " + fieldTypeName(f.type) + " (advertised " + fieldTypeName(a->type) + ")";
        }
        if (!f.hasData || f.length < 0 || (a->length == 1 && f.length != 1))
        {
            return field + " of length " + std::to_string(f.length) + (f.hasData ? "" : " without data");
        }
        if (a->length != 1)
        {
            continue;
        }
        if (isFloatType(f.type))
        {
            double const v = f.type == FT::kFLOAT32 ? load<float>(f.bytes.data()) : load<double>(f.bytes.data());
            if (!std::isfinite(v))
            {
                return field + " = " + std::to_string(v);
            }
        }
        if (f.type == FT::kINT64)
        {
            int64_t const v = load<int64_t>(f.bytes.data());
            if (v < -kLARGEST_EXACT_INTEGER || v > kLARGEST_EXACT_INTEGER)
            {
                return field + " = " + std::to_string(v) + ", beyond +-2^53";
            }
        }
    }
    return "";
}

std::string describe(Collection const& c)
{
    if (c.null)
    {
        return "(no collection)";
    }
    std::string out = c.negativeCount != 0 ? "nbFields " + std::to_string(c.negativeCount) + " {" : "{";
    for (size_t i = 0; i < c.fields.size(); ++i)
    {
        FieldSet::Field const& f = c.fields[i].field;
        out += (i ? ", " : "") + (c.fields[i].nullName ? std::string("(null)") : "'" + f.name + "'") + ": "
               + fieldTypeName(f.type) + "[" + std::to_string(f.length) + "]";
        if (!f.hasData)
        {
            out += " no data";
        }
        else if (f.length > 0 && isIntType(f.type) && f.type != FT::kINT8)
        {
            out += " "
                   + std::to_string(f.type == FT::kINT64   ? load<int64_t>(f.bytes.data())
                                    : f.type == FT::kINT32 ? load<int32_t>(f.bytes.data())
                                                           : load<int16_t>(f.bytes.data()))
                   + (f.length > 1 ? " ..." : "");
        }
        else if (f.length > 0 && isFloatType(f.type))
        {
            char text[32];
            double const v = f.type == FT::kFLOAT32 ? load<float>(f.bytes.data()) : load<double>(f.bytes.data());
            std::snprintf(text, sizeof(text), " %.9g", v);
            out += text + std::string(f.length > 1 ? " ..." : "");
        }
    }
    return out + "}";
}

// The collection createPlugin sees, each field's data ending at a PROT_NONE page.
class Materialized
{
public:
    explicit Materialized(Collection const& c)
        : mNull(c.null)
    {
        for (Draft const& d : c.fields)
        {
            void const* data = nullptr;
            if (d.field.hasData)
            {
                mWindows.push_back(std::make_unique<GuardedWindow>(d.field.bytes.size()));
                auto* at = static_cast<uint8_t*>(mWindows.back()->endAligned(d.field.bytes.size()));
                std::copy(d.field.bytes.begin(), d.field.bytes.end(), at);
                data = at;
            }
            mFields.emplace_back(d.nullName ? nullptr : d.field.name.c_str(), data, d.field.type, d.field.length);
        }
        mCollection.nbFields = c.negativeCount != 0 ? c.negativeCount : static_cast<int32_t>(mFields.size());
        mCollection.fields = mFields.data();
    }
    nvinfer1::PluginFieldCollection const* get() const
    {
        return mNull ? nullptr : &mCollection;
    }

private:
    bool mNull;
    std::vector<std::unique_ptr<GuardedWindow>> mWindows;
    std::vector<nvinfer1::PluginField> mFields;
    nvinfer1::PluginFieldCollection mCollection{};
};

int64_t optionalInt(JsonReader const& request, char const* key, int64_t otherwise)
{
    std::optional<JsonReader> const v = request.find(key);
    return v ? v->asInt() : otherwise;
}

struct CreatorStats
{
    std::string plugin;
    std::string library;
    int64_t attempts{0}, created{0}, rejected{0}, mustRefuse{0}, roundTrips{0}, violations{0};
};

class Fuzz
{
public:
    explicit Fuzz(JsonReader const& request)
        : mSeed(static_cast<uint64_t>(optionalInt(request, "seed", 0)))
        , mFirst(optionalInt(request, "first", 0))
        , mCount(optionalInt(request, "count", 100))
        , mMaxLength(static_cast<int32_t>(optionalInt(request, "max_length", 4096)))
    {
        if (std::optional<JsonReader> const seeds = request.find("seeds"))
        {
            for (JsonReader const& s : seeds->items())
            {
                JsonReader const p = s.at("plugin");
                mSeeds[id(p.at("namespace").asString().c_str(), p.at("name").asString().c_str(),
                           p.at("version").asString().c_str())]
                    .push_back(FieldSet::fromJson(s.at("fields")));
            }
        }
    }

    void run(JsonReader const& libraries)
    {
        FaultScope faults;
        for (JsonReader const& library : libraries.items())
        {
            fuzzLibrary(library.asString());
        }
    }

    Json report() const
    {
        Json creators = Json::array();
        for (CreatorStats const& s : mStats)
        {
            creators.push_back({{"plugin", s.plugin}, {"library", s.library}, {"attempts", s.attempts},
                {"created", s.created}, {"rejected", s.rejected}, {"must_reject", s.mustRefuse},
                {"round_trips", s.roundTrips}, {"violations", s.violations}});
        }
        return {{"creators", std::move(creators)}, {"violations", mViolations}, {"violation_count", mViolationCount}};
    }

    int64_t violationCount() const noexcept
    {
        return mViolationCount;
    }

private:
    static std::string id(char const* ns, char const* name, char const* version)
    {
        auto text = [](char const* s) { return std::string(s != nullptr ? s : "(null)"); };
        return text(ns) + "::" + text(name) + " v" + text(version);
    }

    // Runs fn trapped; an escaping exception or a memory fault becomes a violation and false.
    template <typename F>
    bool call(char const* method, F&& fn)
    {
        trace(mPlugin + " " + method + " #" + std::to_string(mIteration));
        TrapOutcome const outcome = trapped(fn);
        if (outcome.kind == TrapOutcome::Kind::kEXCEPTION)
        {
            violation("no-throw", std::string(method) + ": an exception escaped: " + outcome.what);
        }
        else if (outcome.kind == TrapOutcome::Kind::kFAULT)
        {
            violation(
                "crash", std::string(method) + ": memory fault at address " + std::to_string(outcome.faultAddress));
        }
        return outcome.ok();
    }

    void violation(std::string const& rule, std::string const& detail)
    {
        ++mViolationCount;
        if (++mCreatorViolations <= kREPORTED_PER_CREATOR)
        {
            mViolations.push_back({{"plugin", mPlugin}, {"iteration", mIteration}, {"rule", rule}, {"detail", detail},
                {"fields", mFields}});
        }
    }

    void destroy(nvinfer1::IPluginV3* plugin)
    {
        if (plugin != nullptr)
        {
            call("~IPluginV3", [&] { delete plugin; });
        }
    }

    void fuzzLibrary(std::string const& path)
    {
        void* library = openPluginLibrary(path);
        auto setLoggerFinder = reinterpret_cast<SetLoggerFinderFn>(dlsym(library, "setLoggerFinder"));
        auto getCreators = reinterpret_cast<GetCreatorsFn>(dlsym(library, "getCreators"));
        if (setLoggerFinder == nullptr || getCreators == nullptr)
        {
            throw std::runtime_error(path + " does not export setLoggerFinder and getCreators");
        }
        setLoggerFinder(&loggerFinder());
        int32_t count = 0;
        nvinfer1::IPluginCreatorInterface* const* creators = getCreators(count);
        for (int32_t i = 0; creators != nullptr && i < count; ++i)
        {
            nvinfer1::InterfaceInfo const info = creators[i]->getInterfaceInfo();
            if (info.kind != nullptr && std::strcmp(info.kind, "PLUGIN CREATOR_V3ONE") == 0)
            {
                fuzzCreator(path, static_cast<nvinfer1::IPluginCreatorV3One*>(creators[i]));
            }
        }
    }

    void fuzzCreator(std::string const& library, nvinfer1::IPluginCreatorV3One* creator)
    {
        mPlugin = id(creator->getPluginNamespace(), creator->getPluginName(), creator->getPluginVersion());
        std::string const pluginName = creator->getPluginName() != nullptr ? creator->getPluginName() : "";
        std::vector<Advertised> advertised;
        nvinfer1::PluginFieldCollection const* names = creator->getFieldNames();
        for (int32_t i = 0; names != nullptr && names->fields != nullptr && i < names->nbFields; ++i)
        {
            if (names->fields[i].name != nullptr)
            {
                advertised.push_back({names->fields[i].name, names->fields[i].type, names->fields[i].length});
            }
        }
        std::vector<FieldSet> const& seeds = mSeeds[mPlugin];
        CreatorStats stats{mPlugin, library};
        mCreatorViolations = 0;
        CapturingLogger& logger = loggerFinder().logger();
        for (mIteration = mFirst; mIteration < mFirst + mCount; ++mIteration)
        {
            uint64_t const seed = splitMix(mSeed ^ splitMix(stableHash(mPlugin) ^ splitMix(mIteration)));
            Generator generator(seed, advertised, seeds, mMaxLength);
            nvinfer1::TensorRTPhase const phase = generator.phase();
            Collection const collection = generator.next();
            std::string const refuse = mustRefuse(collection, advertised);
            mFields = describe(collection);
            Materialized const fields(collection);
            ++stats.attempts;
            stats.mustRefuse += refuse.empty() ? 0 : 1;

            std::vector<LogLine> lines;
            logger.begin(&lines);
            nvinfer1::IPluginV3* plugin = nullptr;
            bool const returned = call(
                "createPlugin", [&] { plugin = creator->createPlugin(pluginName.c_str(), fields.get(), phase); });
            logger.end();
            if (!returned)
            {
                continue;
            }
            if (plugin == nullptr)
            {
                ++stats.rejected;
                bool const named = std::any_of(lines.begin(), lines.end(),
                    [&](LogLine const& line)
                    {
                        return line.severity <= nvinfer1::ILogger::Severity::kERROR
                               && line.message.find(pluginName) != std::string::npos;
                    });
                if (!named)
                {
                    violation("silent-rejection",
                        "createPlugin returned nullptr without logging an error that names " + pluginName);
                }
                continue;
            }
            ++stats.created;
            if (!refuse.empty())
            {
                violation("invalid-fields-accepted", "createPlugin returned a plugin for fields with " + refuse);
            }
            stats.roundTrips += roundTrip(creator, plugin, advertised) ? 1 : 0;
            destroy(plugin);
        }
        stats.violations = mCreatorViolations;
        mStats.push_back(stats);
    }

    std::optional<FieldSet> serialized(nvinfer1::IPluginV3* plugin, char const* which)
    {
        nvinfer1::PluginFieldCollection const* fc = nullptr;
        if (!call("getFieldsToSerialize",
                [&]
                {
                    auto* runtime = static_cast<nvinfer1::IPluginV3OneRuntime*>(
                        plugin->getCapabilityInterface(nvinfer1::PluginCapabilityType::kRUNTIME));
                    fc = runtime != nullptr ? runtime->getFieldsToSerialize() : nullptr;
                }))
        {
            return std::nullopt;
        }
        try
        {
            return FieldSet::fromCollection(fc);
        }
        catch (std::exception const& e)
        {
            violation("serialization", std::string("getFieldsToSerialize of the ") + which + " plugin: " + e.what());
            return std::nullopt;
        }
    }

    bool roundTrip(
        nvinfer1::IPluginCreatorV3One* creator, nvinfer1::IPluginV3* plugin, std::vector<Advertised> const& advertised)
    {
        nvinfer1::IPluginV3* copy = nullptr;
        if (call("clone", [&] { copy = plugin->clone(); }) && copy == nullptr)
        {
            violation("clone", "clone returned nullptr");
        }
        destroy(copy);
        std::optional<FieldSet> const fields = serialized(plugin, "created");
        if (!fields)
        {
            return false;
        }
        for (FieldSet::Field const& f : fields->fields())
        {
            auto const a = std::find_if(
                advertised.begin(), advertised.end(), [&](Advertised const& x) { return x.name == f.name; });
            bool const typed = a != advertised.end() && (a->type == f.type || a->type == FT::kUNKNOWN);
            if (!typed || (a->length == 1 && f.length != 1))
            {
                violation("serialization", "getFieldsToSerialize gives field '" + f.name + "' as "
                                               + fieldTypeName(f.type) + "[" + std::to_string(f.length)
                                               + "], which getFieldNames does not advertise");
            }
        }
        // What a plan holds: bytes. The runtime plugin is created from what is read back.
        FieldSet restored = FieldSet::deserialize(fields->serialize());
        std::vector<LogLine> lines;
        loggerFinder().logger().begin(&lines);
        nvinfer1::IPluginV3* again = nullptr;
        bool const returned = call("createPlugin(kRUNTIME)",
            [&]
            {
                again = creator->createPlugin(
                    creator->getPluginName(), restored.collection(), nvinfer1::TensorRTPhase::kRUNTIME);
            });
        loggerFinder().logger().end();
        if (!returned)
        {
            return false;
        }
        if (again == nullptr)
        {
            violation("serialization", "createPlugin(kRUNTIME) rejected the serialized fields " + fields->describe()
                                           + (lines.empty() ? std::string() : ": " + lines.front().message));
            return false;
        }
        std::optional<FieldSet> const twice = serialized(again, "re-created");
        destroy(again);
        if (twice && *twice != *fields)
        {
            violation("serialization",
                "the plugin re-created from " + fields->describe() + " serializes " + twice->describe());
        }
        return twice.has_value() && *twice == *fields;
    }

    uint64_t mSeed;
    int64_t mFirst;
    int64_t mCount;
    int32_t mMaxLength;
    std::map<std::string, std::vector<FieldSet>> mSeeds;
    std::vector<CreatorStats> mStats;
    Json mViolations = Json::array();
    int64_t mViolationCount{0};
    // The case under way, for violations and traces.
    std::string mPlugin;
    int64_t mIteration{0};
    int64_t mCreatorViolations{0};
    std::string mFields;
};

} // namespace

Json runFieldFuzz(JsonReader const& request)
{
    Fuzz fuzz(request);
    fuzz.run(request.at("libraries"));
    return fuzz.report();
}

} // namespace ttp::harness
