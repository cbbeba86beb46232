// Prints the CPython struct offsets gpuwhy's BPF frame walker needs, from the interpreter's own
// headers. Build against one interpreter (see py_offsets_probe.sh) and compare with the frozen
// table in ../python_offsets.cc. Reading CPython headers is the source of truth for 3.10-3.12,
// which have no _Py_DebugOffsets.
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>

#include "internal/pycore_interp.h"
#include "internal/pycore_runtime.h"
#if PY_VERSION_HEX >= 0x030B0000
#include "internal/pycore_code.h"
#include "internal/pycore_frame.h"
#else
#include "frameobject.h"
#endif

#define P(name, value) printf("%-34s %zu\n", name, (size_t)(value))

int main(void) {
  printf("version %d.%d.%d\n", PY_MAJOR_VERSION, PY_MINOR_VERSION, PY_MICRO_VERSION);
  P("runtime.interpreters_head", offsetof(_PyRuntimeState, interpreters.head));
  P("interp.next", offsetof(PyInterpreterState, next));
#if PY_VERSION_HEX >= 0x030B0000
  P("interp.threads_head", offsetof(PyInterpreterState, threads.head));
  P("tstate.native_thread_id", offsetof(PyThreadState, native_thread_id));
#else
  P("interp.threads_head(tstate_head)", offsetof(PyInterpreterState, tstate_head));
#endif
  P("tstate.next", offsetof(PyThreadState, next));
  P("tstate.thread_id", offsetof(PyThreadState, thread_id));
#if PY_VERSION_HEX >= 0x030D0000
  P("tstate.current_frame", offsetof(PyThreadState, current_frame));
  P("frame.code(f_executable)", offsetof(_PyInterpreterFrame, f_executable));
  P("frame.previous", offsetof(_PyInterpreterFrame, previous));
  P("frame.instr(instr_ptr)", offsetof(_PyInterpreterFrame, instr_ptr));
  P("frame.owner", offsetof(_PyInterpreterFrame, owner));
#elif PY_VERSION_HEX >= 0x030B0000
  P("tstate.cframe", offsetof(PyThreadState, cframe));
  P("cframe.current_frame", offsetof(_PyCFrame, current_frame));
  P("frame.code(f_code)", offsetof(_PyInterpreterFrame, f_code));
  P("frame.previous", offsetof(_PyInterpreterFrame, previous));
  P("frame.instr(prev_instr)", offsetof(_PyInterpreterFrame, prev_instr));
#if PY_VERSION_HEX >= 0x030C0000
  P("frame.owner", offsetof(_PyInterpreterFrame, owner));
#else
  P("frame.is_entry", offsetof(_PyInterpreterFrame, is_entry));
#endif
#else
  P("tstate.frame", offsetof(PyThreadState, frame));
  P("frame.code(f_code)", offsetof(PyFrameObject, f_code));
  P("frame.previous(f_back)", offsetof(PyFrameObject, f_back));
  P("frame.instr(f_lasti)", offsetof(PyFrameObject, f_lasti));
#endif
  P("code.filename", offsetof(PyCodeObject, co_filename));
  P("code.name", offsetof(PyCodeObject, co_name));
#if PY_VERSION_HEX >= 0x030B0000
  P("code.qualname", offsetof(PyCodeObject, co_qualname));
  P("code.code_adaptive", offsetof(PyCodeObject, co_code_adaptive));
#endif
  P("code.firstlineno", offsetof(PyCodeObject, co_firstlineno));
  P("code.linetable", offsetof(PyCodeObject, co_linetable));
  P("bytes.ob_size", offsetof(PyBytesObject, ob_base.ob_size));
  P("bytes.ob_sval", offsetof(PyBytesObject, ob_sval));
  P("unicode.length", offsetof(PyASCIIObject, length));
  P("unicode.state", offsetof(PyASCIIObject, state));
  P("unicode.ascii_size", sizeof(PyASCIIObject));
  P("unicode.compact_size", sizeof(PyCompactUnicodeObject));
  // The GIL: 3.10/3.11 keep it in _PyRuntime's ceval state; 3.12+ give each interpreter a
  // pointer to the GIL it uses (the main interpreter's own _gil, or a shared one).
#if PY_VERSION_HEX >= 0x030C0000
  P("interp.ceval_gil", offsetof(PyInterpreterState, ceval.gil));
#else
  P("runtime.gil", offsetof(_PyRuntimeState, ceval.gil));
#endif
  P("gil.last_holder", offsetof(struct _gil_runtime_state, last_holder));
  P("gil.locked", offsetof(struct _gil_runtime_state, locked));
  return 0;
}
