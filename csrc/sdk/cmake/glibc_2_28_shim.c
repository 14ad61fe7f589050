/* Linked into every library that manylinux_2_28_c++ links: the two glibc symbols newer than 2.28 that gcc 12's
 * libstdc++ (static) and headers use, so that the libraries load on glibc 2.28. Hidden: each library has its own. */
#include <stdint.h>
#include <sys/random.h>
#include <sys/types.h>

/* glibc 2.32: nonzero while the process has one thread, letting libstdc++ skip atomic operations (shared_ptr,
 * locale). Never claiming so keeps them atomic, which is always correct. */
__attribute__((visibility("hidden"))) char __libc_single_threaded = 0;

/* glibc 2.36: std::random_device's "default" source. getrandom is glibc 2.25. */
__attribute__((visibility("hidden"))) uint32_t arc4random(void)
{
    uint32_t value = 0;
    while (getrandom(&value, sizeof value, 0) != (ssize_t) sizeof value)
    {
    }
    return value;
}
