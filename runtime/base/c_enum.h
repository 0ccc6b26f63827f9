// Enum arguments as a C caller stored them. C lets an enum object hold any int, and the C
// API promises a clear error for a bad one; C++ leaves loading an enum object whose value
// lies outside its enumerators' range undefined (UBSan's "load of value ... which is not a
// valid value"). So a check on caller-supplied enum fields reads the object's bytes as an
// int first, and only a value that passed is used as the enum.
#pragma once

#include <cstring>
#include <type_traits>

namespace ibex {

template <class E>
    requires std::is_enum_v<E>
inline int c_enum_value(const E &e) {
    static_assert(sizeof(E) == sizeof(int), "the C API's enums are int-sized");
    int v;
    std::memcpy(&v, &e, sizeof v);
    return v;
}

// v is one of first..last (the enumerators are contiguous there).
template <class E>
    requires std::is_enum_v<E>
inline bool c_enum_in(const E &e, E first, E last) {
    const int v = c_enum_value(e);
    return v >= static_cast<int>(first) && v <= static_cast<int>(last);
}

// v is one of 0..count-1 (an enum that ends in a *_COUNT enumerator).
template <class E>
    requires std::is_enum_v<E>
inline bool c_enum_below(const E &e, int count) {
    const int v = c_enum_value(e);
    return v >= 0 && v < count;
}

} // namespace ibex
