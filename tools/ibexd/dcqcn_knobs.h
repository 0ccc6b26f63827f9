// ibexd's view of the DCQCN knobs: the names, firmware ranges and presets live in
// congestion/dcqcn/knobs.h (one table for the daemon and the soft transport).
#pragma once

#include "congestion/dcqcn/knobs.h"

namespace ibex::tuning {

using cc::dcqcn::find_knob;
using cc::dcqcn::Knob;
using cc::dcqcn::knob_info;
using cc::dcqcn::knob_table;
using cc::dcqcn::KnobInfo;
using cc::dcqcn::kKnobCount;
using cc::dcqcn::KnobValues;
using cc::dcqcn::profile_names;
using cc::dcqcn::profile_values;

} // namespace ibex::tuning
