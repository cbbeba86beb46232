// The function the stack tests probe. Built -O0 -g -fno-omit-frame-pointer into
// libgw_stack_target.so; stacks_test.cc asserts the line of its entry (line 7).
#include <stdint.h>

volatile int gw_stack_target_sink;

__attribute__((noinline, visibility("default"))) int gw_stack_target(int x) {
  gw_stack_target_sink += x;
  return gw_stack_target_sink;
}
