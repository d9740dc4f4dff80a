// The interface every backend implements: one file per runtime
// (bench/backends/<runtime>.hpp), each defining `mote_bench::backend`. A
// suite's driver (bench/<suite>/main.cpp) is compiled once per backend, which
// CMake names with MOTE_BENCH_BACKEND_HEADER; MOTE_BENCH_RUNTIME is the
// runtime's name in bench/suites.json and in the records, and a backend's
// named build options (MOTE_BENCH_WITH_<OPTION>=1) make its variants.
//
//   namespace mote_bench {
//   class backend {
//    public:
//     static constexpr bool concurrent;      // false: everything runs in order
//                                            // on the caller (serial)
//     static constexpr bool runs_on_caller;  // the caller itself runs tasks
//                                            // (serial, mote's assistant)
//     explicit backend(options& o);          // starts the runtime for o.workers
//     std::string_view name() const;         // MOTE_BENCH_RUNTIME
//     const extras& info() const;            // recorded beside every result
//
//     // fork-join (fork_join): kernels call the statics from any task
//     template <class F> auto run(F&& f);            // f() on a worker; its result
//     template <class F, class G> static void fork2(F& f, G& g);
//                                            // f() and g(), possibly at once;
//                                            // g is the one spawned
//     template <class F> static void spawn_each(int n, F& f);
//                                            // f(0) .. f(n - 1) as tasks, waited
//     // runtime costs (micro)
//     long micro_iters;                      // default loop length
//     double spawn_loop(long iters);         // seconds for iters spawn+join
//                                            // pairs of empty tasks, on a worker
//     template <int GroupSize> double group_loop(long tasks);
//                                            // seconds for tasks empty tasks,
//                                            // GroupSize at a time in one group
//     double wake_once();                    // seconds from handing an idle
//                                            // runtime a task to its start on
//                                            // another thread
//     template <class Work> void warm(Work work);
//                                            // work() on every worker once
//     // two tasks at a time (tiny)
//     template <class Body> void pair_region(Body&& body);
//                                            // body() where pairs can run
//     template <class F, class G> void pair(F& f, G& g);
//                                            // f() and g(), possibly at once
//     // loops (loops)
//     static constexpr bool has_auto;        // an automatic grain (grain 0)
//     template <class Body> void loop_region(Body&& body);
//     template <class F> void loop(size_t n, size_t grain, F&& body);   // body(b, e)
//     template <class T, class F, class C>
//     T reduce(size_t n, size_t grain, T identity, F&& body, C&& combine);
//     template <class F> void nested(size_t rows, size_t cols, F&& body);  // body(r, b, e)
//     template <class T, class Init> auto locals(Init init);  // .local(), .for_each(f)
//     // data flow (dataflow; the flows' accesses in dataflow_api.hpp)
//     template <class Body> void flow_region(Body&& body);
//                                            // body() where a flow can spawn
//     template <class P> auto flow_prepare(P& p);
//                                            // untimed, in flow_region: a
//                                            // program whose execute() runs
//                                            // p.graph(flow) and waits for it
//     static constexpr bool flow_builds_graph;  // only if flow_prepare builds
//                                            // the graph (extra.build_ms)
//     // pipelines (streams; the stages in streams_api.hpp)
//     template <class... S>
//     void pipeline(size_t items, size_t in_flight, S&... stages);
//                                            // items through the stages
//     template <class S, class A, class B, class C>
//     void feedback(size_t items, size_t d, size_t in_flight, S& s, A& a, B& b, C& c);
//                                            // four serial stages, a of item
//                                            // i fed by b of item i - d
//     void streams_note(extras& ex) const;   // optional: added to each record
//   };
//   }
//
// A suite uses only its own part; members are templates or inline, so a
// backend compiles for a suite whatever parts it leaves out of reach. A
// backend's contents sit in an unnamed namespace inside mote_bench: each is
// compiled into one source of one executable, and the kernels instantiated on
// it then have internal linkage and inline as in a single source file. The
// serial backend is the back-to-back baseline; the loops suite times its own
// serial reference (loops::serial_par) instead of the serial backend's loops.
#pragma once

#include "../common/harness.hpp"

#define MOTE_BENCH_STRINGIZE2(x) #x
#define MOTE_BENCH_STRINGIZE(x) MOTE_BENCH_STRINGIZE2(x)

#ifndef MOTE_BENCH_RUNTIME
#  error "MOTE_BENCH_RUNTIME names the runtime, as in bench/suites.json (bench/CMakeLists.txt)"
#endif
