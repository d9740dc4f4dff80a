// Task-aware MPI (include/mote/mpi.hpp), run by ctest under mpirun with 2 and
// 4 ranks. Every rank runs the same tests in the same order; pairs of ranks
// (rank ^ 1) or the ring (rank + 1) exchange messages. Results are checked
// against the values each rank can compute for its peers; a hang becomes a
// failure through the watchdog (and ctest's TIMEOUT behind it).
#include <gtest/gtest.h>
#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "mote/dataflow.hpp"
#include "mote/error.hpp"
#include "mote/mpi.hpp"
#include "mote/runtime.hpp"
#include "mote/task_group.hpp"

namespace {

#if defined(__SANITIZE_THREAD__)
constexpr int kScale = 4;  // sizes shrink under TSan
#else
constexpr int kScale = 1;
#endif

int g_rank = 0;
int g_size = 1;
mote::runtime* g_rt = nullptr;

int partner() { return g_rank ^ 1; }
bool paired() { return partner() < g_size; }
int next_rank() { return (g_rank + 1) % g_size; }
int prev_rank() { return (g_rank + g_size - 1) % g_size; }

// What rank r sends as element i of message k: distinct everywhere.
double value(int r, int k, int i) { return r * 1e6 + k * 1e3 + i; }

// Every test starts with the ranks in step, so that one test's late
// messages never meet the next one's receives (tags differ as well).
class Mpi : public ::testing::Test {
 protected:
  void SetUp() override { MPI_Barrier(MPI_COMM_WORLD); }
  void TearDown() override {
    EXPECT_EQ(mote::mpi::get_stats().outstanding, 0u) << "a request was left with the service";
    MPI_Barrier(MPI_COMM_WORLD);
  }
};

// Blocking mode: many task_group tasks, each a send and a receive round the
// ring; the workers run other tasks while their receives are pending.
TEST_F(Mpi, PointToPointInTasksRoundTheRing) {
  const int n = 64 / kScale;
  const int len = 100;
  std::vector<std::vector<double>> got(n, std::vector<double>(len, -1));
  std::vector<std::vector<double>> sent(n, std::vector<double>(len));
  g_rt->run([&] {
    mote::task_group g;
    for (int k = 0; k < n; ++k) {
      g.spawn([&, k] {
        for (int i = 0; i < len; ++i) sent[k][i] = value(g_rank, k, i);
        MPI_Request r;
        MPI_Isend(sent[k].data(), len, MPI_DOUBLE, next_rank(), 100 + k, MPI_COMM_WORLD, &r);
        mote::mpi::recv(got[k].data(), len, MPI_DOUBLE, prev_rank(), 100 + k, MPI_COMM_WORLD);
        mote::mpi::wait(r);
        EXPECT_EQ(r, MPI_REQUEST_NULL);
      });
    }
    g.wait();
  });
  for (int k = 0; k < n; ++k) {
    for (int i = 0; i < len; ++i) ASSERT_EQ(got[k][i], value(prev_rank(), k, i)) << "message " << k;
  }
}

// send/recv with statuses, and waitall over a mix with a null request.
TEST_F(Mpi, SendRecvStatusAndWaitall) {
  if (!paired()) GTEST_SKIP();
  g_rt->run([&] {
    int out = g_rank * 10 + 1, in = -1;
    if (g_rank < partner()) {
      mote::mpi::send(&out, 1, MPI_INT, partner(), 200, MPI_COMM_WORLD);
      MPI_Status st;
      mote::mpi::recv(&in, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
      EXPECT_EQ(st.MPI_SOURCE, partner());
      EXPECT_EQ(st.MPI_TAG, 201);
    } else {
      MPI_Status st;
      mote::mpi::recv(&in, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
      EXPECT_EQ(st.MPI_TAG, 200);
      mote::mpi::send(&out, 1, MPI_INT, partner(), 201, MPI_COMM_WORLD);
    }
    EXPECT_EQ(in, partner() * 10 + 1);
    int a = g_rank, b = -1;
    MPI_Request rs[3];
    MPI_Irecv(&b, 1, MPI_INT, partner(), 202, MPI_COMM_WORLD, &rs[0]);
    rs[1] = MPI_REQUEST_NULL;
    MPI_Isend(&a, 1, MPI_INT, partner(), 202, MPI_COMM_WORLD, &rs[2]);
    MPI_Status sts[3];
    mote::mpi::waitall(rs, sts);
    EXPECT_EQ(b, partner());
    EXPECT_EQ(sts[0].MPI_SOURCE, partner());
    for (MPI_Request r : rs) EXPECT_EQ(r, MPI_REQUEST_NULL);
  });
}

// The main thread is no worker: wait() is MPI's own wait there.
TEST_F(Mpi, WaitFromOutsideAWorker) {
  if (!paired()) GTEST_SKIP();
  std::vector<double> out(1000), in(1000, -1);
  for (int i = 0; i < 1000; ++i) out[i] = value(g_rank, 3, i);
  MPI_Request rs[2];
  MPI_Irecv(in.data(), 1000, MPI_DOUBLE, partner(), 300, MPI_COMM_WORLD, &rs[0]);
  MPI_Isend(out.data(), 1000, MPI_DOUBLE, partner(), 300, MPI_COMM_WORLD, &rs[1]);
  mote::mpi::wait(rs[0]);
  mote::mpi::wait(rs[1]);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(in[i], value(partner(), 3, i));
  // iwait outside a data-flow task is a wait too.
  MPI_Irecv(in.data(), 1000, MPI_DOUBLE, partner(), 301, MPI_COMM_WORLD, &rs[0]);
  MPI_Isend(out.data(), 1000, MPI_DOUBLE, partner(), 301, MPI_COMM_WORLD, &rs[1]);
  mote::mpi::iwaitall(rs);
  EXPECT_EQ(rs[0], MPI_REQUEST_NULL);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(in[i], value(partner(), 3, i));
}

// Non-blocking collectives in concurrent tasks, each on its own
// communicator (collectives on one communicator must be issued in one order
// on every rank, which concurrent tasks do not give): blocking mode in
// task_group tasks, non-blocking mode in data-flow tasks whose readers check.
TEST_F(Mpi, CollectivesInTasks) {
  const int n = 16 / kScale;
  std::vector<MPI_Comm> comms(2 * n);
  for (auto& c : comms) MPI_Comm_dup(MPI_COMM_WORLD, &c);
  std::vector<long> sums(n, -1), maxes(n, -1), checked(n, 0);
  const long ranks_sum = static_cast<long>(g_size) * (g_size - 1) / 2;
  g_rt->run([&] {
    mote::task_group g;
    for (int k = 0; k < n; ++k) {
      g.spawn([&, k] {
        long mine = g_rank + k, sum = 0;
        MPI_Request r;
        MPI_Iallreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, comms[k], &r);
        mote::mpi::wait(r);
        sums[k] = sum;
      });
    }
    g.wait();
    mote::dataflow df;
    std::vector<long> mine(n);
    for (int k = 0; k < n; ++k) {
      mine[k] = g_rank * k;
      df.spawn(mote::in(mine[k]), mote::out(maxes[k]), [&, k] {
        MPI_Request r;
        MPI_Iallreduce(&mine[k], &maxes[k], 1, MPI_LONG, MPI_MAX, comms[n + k], &r);
        mote::mpi::iwait(r);
      });
      df.spawn(mote::in(maxes[k]), [&, k] { checked[k] = maxes[k]; });
    }
    df.wait();
  });
  for (int k = 0; k < n; ++k) {
    EXPECT_EQ(sums[k], ranks_sum + static_cast<long>(g_size) * k) << k;
    EXPECT_EQ(checked[k], static_cast<long>(g_size - 1) * k) << k;
  }
  // A blocking collective on the main thread, for good measure.
  long one = 1, total = 0;
  MPI_Allreduce(&one, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(total, g_size);
  for (auto& c : comms) MPI_Comm_free(&c);
}

// iwait returns at once and the successors see the data: the receiving task
// asks for the data only after its iwait has returned (a "go" message), so
// an iwait that blocked would never return (the watchdog would fire), and a
// successor released early would read the buffer's old contents.
TEST_F(Mpi, IwaitOrdering) {
  if (!paired()) GTEST_SKIP();
  const int blocks = 32 / kScale;
  const int len = 256;
  const int rounds = 4;
  const bool receiver = (g_rank & 1) == 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::vector<double>> buf(blocks, std::vector<double>(len, -1));
    std::vector<double> seen(blocks, -1);
    std::vector<int> returned(blocks, 0);
    g_rt->run([&] {
      mote::dataflow df;
      for (int k = 0; k < blocks; ++k) {
        if (receiver) {
          df.spawn(mote::out(buf[k]), mote::out(returned[k]), [&, k] {
            MPI_Request r;
            MPI_Irecv(buf[k].data(), len, MPI_DOUBLE, partner(), 400 + k, MPI_COMM_WORLD, &r);
            mote::mpi::iwait(r);
            EXPECT_EQ(r, MPI_REQUEST_NULL);
            returned[k] = 1;
            int go = k;
            MPI_Send(&go, 1, MPI_INT, partner(), 1400 + k, MPI_COMM_WORLD);
          });
          // A reader of the buffer: runs only once the data is in.
          df.spawn(mote::in(buf[k]), mote::in(returned[k]), [&, k] {
            double s = 0;
            for (int i = 0; i < len; ++i) s += buf[k][i] == value(partner(), k + round, i) ? 1 : 0;
            seen[k] = s;
          });
        } else {
          df.spawn(mote::inout(buf[k]), [&, k] {
            int go = -1;
            mote::mpi::recv(&go, 1, MPI_INT, partner(), 1400 + k, MPI_COMM_WORLD);
            EXPECT_EQ(go, k);
            for (int i = 0; i < len; ++i) buf[k][i] = value(g_rank, k + round, i);
            MPI_Request r;
            MPI_Isend(buf[k].data(), len, MPI_DOUBLE, partner(), 400 + k, MPI_COMM_WORLD, &r);
            mote::mpi::iwait(r);  // the buffer is not reused until the send completed
          });
        }
      }
      df.wait();
    });
    if (receiver) {
      for (int k = 0; k < blocks; ++k) {
        ASSERT_EQ(returned[k], 1);
        ASSERT_EQ(seen[k], len) << "block " << k << ": its reader ran before its data arrived";
      }
    }
  }
}

// Thousands of requests outstanding at once, in one poll's batch: each rank
// posts every receive (one data-flow task each, bound with iwait), then the
// partner learns (one go message) that it may send them all.
TEST_F(Mpi, ManyOutstandingRequests) {
  if (!paired()) GTEST_SKIP();
  const int n = 4000 / kScale;
  std::vector<int> in(n, -1), out(n), doubled(n, 0);
  for (int i = 0; i < n; ++i) out[i] = g_rank * 100000 + i;
  const std::uint64_t before = mote::mpi::get_stats().requests;
  std::atomic<int> posted{0};
  g_rt->run([&] {
    mote::dataflow df;
    for (int i = 0; i < n; ++i) {
      df.spawn(mote::out(in[i]), [&, i] {
        MPI_Request r;
        MPI_Irecv(&in[i], 1, MPI_INT, partner(), 500, MPI_COMM_WORLD, &r);
        mote::mpi::iwait(r);
        posted.fetch_add(1, std::memory_order_relaxed);
      });
      df.spawn(mote::in(in[i]), mote::out(doubled[i]), [&, i] { doubled[i] = 2 * in[i]; });
    }
    // The sends, from a thread outside the runtime once every receive here
    // is posted (a task that spun on `posted` would keep its worker's
    // unshared tasks from the others). Messages from one sender with one
    // tag match the receives in posting order, and the tasks posted them in
    // any order: the check below is on the set.
    std::thread sender([&] {
      while (posted.load(std::memory_order_relaxed) < n) std::this_thread::yield();
      int go = 1, theirs = 0;
      MPI_Sendrecv(&go, 1, MPI_INT, partner(), 501, &theirs, 1, MPI_INT, partner(), 501, MPI_COMM_WORLD,
                   MPI_STATUS_IGNORE);
      std::vector<MPI_Request> rs(n);
      for (int i = 0; i < n; ++i) MPI_Isend(&out[i], 1, MPI_INT, partner(), 500, MPI_COMM_WORLD, &rs[i]);
      mote::mpi::waitall(rs);
    });
    df.wait();
    sender.join();
  });
  std::vector<int> got(doubled);
  std::sort(got.begin(), got.end());
  for (int i = 0; i < n; ++i) ASSERT_EQ(got[i], 2 * (partner() * 100000 + i));
  // Every receive was pending when bound: the sends began after all were posted.
  EXPECT_GE(mote::mpi::get_stats().requests - before, static_cast<std::uint64_t>(n));
}

// A task that throws after binding a pending receive: its successors are
// skipped, the others run, the scope's wait throws only once the receive
// completed (the data is there), and the service holds nothing afterwards.
TEST_F(Mpi, ExceptionInATaskWhileRequestsArePending) {
  if (!paired()) GTEST_SKIP();
  const int len = 512;
  std::vector<double> buf(len, -1), out(len);
  for (int i = 0; i < len; ++i) out[i] = value(g_rank, 6, i);
  int successor_ran = 0, independent_ran = 0;
  bool threw = false;
  g_rt->run([&] {
    mote::dataflow df;
    df.spawn(mote::out(buf), [&] {
      MPI_Request r;
      MPI_Irecv(buf.data(), len, MPI_DOUBLE, partner(), 600, MPI_COMM_WORLD, &r);
      mote::mpi::iwait(r);
      int go = 1;
      MPI_Send(&go, 1, MPI_INT, partner(), 601, MPI_COMM_WORLD);
      throw std::runtime_error("task failed with a receive pending");
    });
    df.spawn(mote::in(buf), [&] { successor_ran = 1; });
    df.spawn([&] {
      int go = 0;
      mote::mpi::recv(&go, 1, MPI_INT, partner(), 601, MPI_COMM_WORLD);
      MPI_Request r;
      MPI_Isend(out.data(), len, MPI_DOUBLE, partner(), 600, MPI_COMM_WORLD, &r);
      mote::mpi::wait(r);
      independent_ran = 1;
    });
    try {
      df.wait();
    } catch (const std::runtime_error& e) {
      threw = std::string(e.what()) == "task failed with a receive pending";
    }
  });
  EXPECT_TRUE(threw);
  EXPECT_EQ(successor_ran, 0);
  EXPECT_EQ(independent_ran, 1);
  for (int i = 0; i < len; ++i) ASSERT_EQ(buf[i], value(partner(), 6, i));

  // Blocking mode: a task waits for its receive while a task it spawned
  // throws; the exception reaches the waits above it once the receive is in
  // (a task_group cancels what has not started, so the thrower is spawned
  // after the receive was posted).
  int waited = 0;
  threw = false;
  g_rt->run([&] {
    mote::task_group g;
    g.spawn([&] {
      int v = -1;
      MPI_Request r;
      MPI_Irecv(&v, 1, MPI_INT, partner(), 602, MPI_COMM_WORLD, &r);
      mote::task_group inner;
      inner.spawn([&] {
        int mine = g_rank;
        mote::mpi::send(&mine, 1, MPI_INT, partner(), 602, MPI_COMM_WORLD);
        throw std::logic_error("sibling failed");
      });
      mote::mpi::wait(r);
      waited = v == partner() ? 1 : -1;
      inner.wait();
    });
    try {
      g.wait();
    } catch (const std::logic_error&) {
      threw = true;
    }
  });
  EXPECT_TRUE(threw);
  EXPECT_EQ(waited, 1);
}

// An MPI error (under MPI_ERRORS_RETURN) becomes mote::mpi::error with MPI's
// message.
TEST_F(Mpi, ErrorsBecomeExceptions) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  int v = 0;
  bool caught = false;
  g_rt->run([&] {
    try {
      mote::mpi::send(&v, 1, MPI_INT, g_size + 5, 0, comm);  // no such rank
    } catch (const mote::mpi::error& e) {
      caught = e.code() != MPI_SUCCESS && std::string(e.what()).find("MPI_Isend") != std::string::npos;
    }
  });
  EXPECT_TRUE(caught);
  MPI_Comm_free(&comm);
}

// Configuration: MOTE_MPI_POLL_US that cannot be parsed names the variable;
// a second attach is refused.
TEST_F(Mpi, BadConfigAndMisuse) {
  EXPECT_THROW(mote::mpi::attach(*g_rt), mote::usage_error);
  mote::mpi::detach();
  for (const char* bad : {"abc", "0", "-5", "12us", "99999999"}) {
    setenv("MOTE_MPI_POLL_US", bad, 1);
    try {
      mote::mpi::attach(*g_rt);
      ADD_FAILURE() << "MOTE_MPI_POLL_US=" << bad << " was accepted";
      mote::mpi::detach();
    } catch (const mote::config_error& e) {
      EXPECT_NE(std::string(e.what()).find("MOTE_MPI_POLL_US"), std::string::npos) << e.what();
    }
  }
  setenv("MOTE_MPI_POLL_US", "20", 1);
  mote::mpi::attach(*g_rt);  // a good value, attached again for the tests after
  unsetenv("MOTE_MPI_POLL_US");
  // The service works after a re-attach.
  if (paired()) {
    int v = g_rank, w = -1;
    g_rt->run([&] {
      MPI_Request r;
      MPI_Isend(&v, 1, MPI_INT, partner(), 700, MPI_COMM_WORLD, &r);
      mote::mpi::recv(&w, 1, MPI_INT, partner(), 700, MPI_COMM_WORLD);
      mote::mpi::wait(r);
    });
    EXPECT_EQ(w, partner());
  }
}

// Runs f with the service attached to rt instead of g_rt, then attaches it
// to g_rt again.
template <class F>
void attached_to(mote::runtime& rt, F f) {
  mote::mpi::detach();
  mote::mpi::attach(rt);
  f();
  mote::mpi::detach();
  mote::mpi::attach(*g_rt);
}

// A thread that sends `n` ints to the partner once the partner's "go"
// (tag go_tag, sent from inside a task after its iwait) has come: the data
// then arrives after the receive was bound, never before.
std::thread send_after_go(const int* data, int n, int tag, int go_tag, MPI_Comm comm = MPI_COMM_WORLD) {
  return std::thread([=] {
    int go = 0;
    MPI_Recv(&go, 1, MPI_INT, partner(), go_tag, comm, MPI_STATUS_IGNORE);
    MPI_Send(data, n, MPI_INT, partner(), tag, comm);
  });
}

void send_go(int go_tag, MPI_Comm comm = MPI_COMM_WORLD) {
  int go = 1;
  MPI_Send(&go, 1, MPI_INT, partner(), go_tag, comm);
}

// MPI_Testsome reports the statuses of the completed requests compactly
// (statuses[k] is indices[k]'s): a waitall over two receives whose second
// completes first gives each its own status.
TEST_F(Mpi, WaitallStatusesFollowTheirRequests) {
  if (!paired()) GTEST_SKIP();
  int in1[2] = {-1, -1}, in2[3] = {-1, -1, -1};
  const int out1[2] = {g_rank, 1}, out2[3] = {g_rank, 2, 2};
  MPI_Status st[2];
  std::thread sender([&] {
    int posted = 0;
    MPI_Recv(&posted, 1, MPI_INT, partner(), 803, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    // The second receive's message first, the first one's later: the
    // pause only widens the window in which a poll sees the second alone.
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    MPI_Send(out2, 3, MPI_INT, partner(), 802, MPI_COMM_WORLD);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    MPI_Send(out1, 2, MPI_INT, partner(), 801, MPI_COMM_WORLD);
  });
  g_rt->run([&] {
    mote::task_group g;
    g.spawn([&] {
      MPI_Request rs[2];
      MPI_Irecv(in1, 2, MPI_INT, partner(), 801, MPI_COMM_WORLD, &rs[0]);
      MPI_Irecv(in2, 3, MPI_INT, partner(), 802, MPI_COMM_WORLD, &rs[1]);
      send_go(803);
      mote::mpi::waitall(rs, st);
    });
    g.wait();
  });
  sender.join();
  int n1 = -1, n2 = -1;
  MPI_Get_count(&st[0], MPI_INT, &n1);
  MPI_Get_count(&st[1], MPI_INT, &n2);
  EXPECT_EQ(st[0].MPI_TAG, 801);
  EXPECT_EQ(n1, 2);
  EXPECT_EQ(st[1].MPI_TAG, 802);
  EXPECT_EQ(n2, 3);
  EXPECT_EQ(st[1].MPI_SOURCE, partner());
  EXPECT_EQ(in1[1], 1);
  EXPECT_EQ(in2[2], 2);
}

// A data-flow task of another runtime than the attached one binds a
// receive with iwait: it completes although that runtime's workers do not
// poll and the attached one's sleep (nothing was outstanding when they went
// to sleep). A blocking wait there completes too.
TEST_F(Mpi, IwaitOnAnotherRuntime) {
  if (!paired()) GTEST_SKIP();
  mote::runtime_options o;
  o.num_workers = 1;
  o.spin = std::chrono::microseconds(20);
  mote::runtime other(o);
  int in = -1, seen = -1, blocked_in = -1;
  const int out = 100 + g_rank;
  // Only widens the window in which the attached runtime's workers are
  // asleep without a timeout.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::thread sender = send_after_go(&out, 1, 811, 812);
  other.run([&] {
    mote::dataflow df;
    df.spawn(mote::out(in), [&] {
      MPI_Request r;
      MPI_Irecv(&in, 1, MPI_INT, partner(), 811, MPI_COMM_WORLD, &r);
      mote::mpi::iwait(r);
      send_go(812);
    });
    df.spawn(mote::in(in), [&] { seen = in; });
    df.wait();
  });
  sender.join();
  EXPECT_EQ(seen, 100 + partner());
  std::thread sender2 = send_after_go(&out, 1, 813, 814);
  other.run([&] {
    mote::task_group g;
    g.spawn([&] {
      MPI_Request r;
      MPI_Irecv(&blocked_in, 1, MPI_INT, partner(), 813, MPI_COMM_WORLD, &r);
      send_go(814);
      mote::mpi::wait(r);
    });
    g.wait();
  });
  sender2.join();
  EXPECT_EQ(blocked_in, 100 + partner());
}

// With no service attached, a wait inside a task would block its worker in
// MPI (with one worker per rank the exchange deadlocks): it is a
// usage_error, and the request stays the caller's.
TEST_F(Mpi, WaitInATaskWithoutTheServiceIsAnError) {
  if (!paired()) GTEST_SKIP();
  int in = -1, in2 = -1;
  const int out = 7 + g_rank;
  MPI_Request send[2], r = MPI_REQUEST_NULL, r2 = MPI_REQUEST_NULL;
  // Sent first: a wait that blocked would still return (before the check).
  MPI_Isend(&out, 1, MPI_INT, partner(), 821, MPI_COMM_WORLD, &send[0]);
  MPI_Isend(&out, 1, MPI_INT, partner(), 822, MPI_COMM_WORLD, &send[1]);
  MPI_Irecv(&in, 1, MPI_INT, partner(), 821, MPI_COMM_WORLD, &r);
  mote::mpi::detach();
  std::string blocking_error, iwait_error;
  g_rt->run([&] {
    try {
      mote::mpi::wait(r);
    } catch (const mote::usage_error& e) {
      blocking_error = e.what();
    }
    mote::dataflow df;
    df.spawn(mote::out(in2), [&] {
      MPI_Irecv(&in2, 1, MPI_INT, partner(), 822, MPI_COMM_WORLD, &r2);
      mote::mpi::iwait(r2);
    });
    try {
      df.wait();
    } catch (const mote::usage_error& e) {
      iwait_error = e.what();
    }
  });
  mote::mpi::attach(*g_rt);
  EXPECT_NE(blocking_error.find("no MPI service"), std::string::npos) << blocking_error;
  EXPECT_NE(iwait_error.find("no MPI service"), std::string::npos) << iwait_error;
  EXPECT_NE(r, MPI_REQUEST_NULL) << "the request must stay the caller's";
  EXPECT_NE(r2, MPI_REQUEST_NULL) << "the request must stay the caller's";
  if (r != MPI_REQUEST_NULL) MPI_Wait(&r, MPI_STATUS_IGNORE);
  if (r2 != MPI_REQUEST_NULL) MPI_Wait(&r2, MPI_STATUS_IGNORE);
  MPI_Waitall(2, send, MPI_STATUSES_IGNORE);
  EXPECT_EQ(in, 7 + partner());
  EXPECT_EQ(in2, 7 + partner());
}

// A communicator whose errors return (the default handler aborts).
MPI_Comm returning_comm() {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return comm;
}

int error_class(int code) {
  int c = -1;
  MPI_Error_class(code, &c);
  return c;
}

// A receive bound with iwait fails after the binding (its message is longer
// than the buffer): its task fails as a task that throws does: its
// successors are skipped, the others run, and the scope's wait throws
// mote::mpi::error with the request's own code, naming the truncation. Two
// such tasks: both fail.
TEST_F(Mpi, FailedRequestBoundWithIwaitFailsItsTask) {
  if (!paired()) GTEST_SKIP();
  MPI_Comm comm = returning_comm();
  const int out[4] = {1, 2, 3, 4};
  int small1 = -1, small2 = -1, successors = 0, independent = 0;
  std::thread sender([&] {
    int go = 0;
    MPI_Recv(&go, 1, MPI_INT, partner(), 832, comm, MPI_STATUS_IGNORE);
    MPI_Recv(&go, 1, MPI_INT, partner(), 833, comm, MPI_STATUS_IGNORE);
    MPI_Send(out, 4, MPI_INT, partner(), 831, comm);  // 4 ints into room for 1
    MPI_Send(out, 4, MPI_INT, partner(), 834, comm);
  });
  int code = MPI_SUCCESS;
  std::string what;
  const std::uint64_t failed_before = mote::mpi::get_stats().failed;
  g_rt->run([&] {
    mote::dataflow df;
    df.spawn(mote::out(small1), [&] {
      MPI_Request r;
      MPI_Irecv(&small1, 1, MPI_INT, partner(), 831, comm, &r);
      mote::mpi::iwait(r);
      send_go(832, comm);
    });
    df.spawn(mote::out(small2), [&] {
      MPI_Request r;
      MPI_Irecv(&small2, 1, MPI_INT, partner(), 834, comm, &r);
      mote::mpi::iwait(r);
      send_go(833, comm);
    });
    df.spawn(mote::in(small1), [&] { ++successors; });
    df.spawn(mote::in(small2), [&] { ++successors; });
    df.spawn([&] { ++independent; });
    try {
      df.wait();
    } catch (const mote::mpi::error& e) {
      code = e.code();
      what = e.what();
    }
  });
  sender.join();
  MPI_Comm_free(&comm);
  EXPECT_EQ(error_class(code), MPI_ERR_TRUNCATE) << what;
  EXPECT_NE(what.find("truncat"), std::string::npos) << what;
  EXPECT_EQ(successors, 0) << "a successor of a failed receive ran on its truncated buffer";
  EXPECT_EQ(independent, 1);
  EXPECT_EQ(mote::mpi::get_stats().failed - failed_before, 2u) << "every failed request is counted";
}

// The same failure when the message is there before the iwait: the task
// throws mote::mpi::error naming the truncation (not MPI_ERR_IN_STATUS).
TEST_F(Mpi, FailedRequestCompleteAtIwaitNamesItsError) {
  if (!paired()) GTEST_SKIP();
  MPI_Comm comm = returning_comm();
  const int out[4] = {1, 2, 3, 4};
  MPI_Request s;
  MPI_Isend(out, 4, MPI_INT, partner(), 841, comm, &s);
  MPI_Status probed;
  MPI_Probe(partner(), 841, comm, &probed);  // the message has arrived
  int small = -1, successor = 0, code = MPI_SUCCESS;
  std::string what;
  g_rt->run([&] {
    mote::dataflow df;
    df.spawn(mote::out(small), [&] {
      MPI_Request r;
      MPI_Irecv(&small, 1, MPI_INT, partner(), 841, comm, &r);
      mote::mpi::iwait(r);
    });
    df.spawn(mote::in(small), [&] { successor = 1; });
    try {
      df.wait();
    } catch (const mote::mpi::error& e) {
      code = e.code();
      what = e.what();
    }
  });
  MPI_Wait(&s, MPI_STATUS_IGNORE);
  MPI_Comm_free(&comm);
  EXPECT_EQ(error_class(code), MPI_ERR_TRUNCATE) << what;
  EXPECT_NE(what.find("truncat"), std::string::npos) << what;
  EXPECT_EQ(successor, 0);
}

// A rank whose iwaited receive waits long (its peer is late: 300 ms here,
// or gone) polls a bounded number of times: the idle workers park between
// polls, longer the longer nothing completes.
TEST_F(Mpi, IdlePollingIsBounded) {
  if (!paired()) GTEST_SKIP();
  const bool receiver = (g_rank & 1) == 0;
  int in = -1, seen = -1;
  const int out = 5;
  std::uint64_t polls = 0;
  if (receiver) {
    const std::uint64_t before = mote::mpi::get_stats().polls;
    g_rt->run([&] {
      mote::dataflow df;
      df.spawn(mote::out(in), [&] {
        MPI_Request r;
        MPI_Irecv(&in, 1, MPI_INT, partner(), 851, MPI_COMM_WORLD, &r);
        mote::mpi::iwait(r);
        send_go(852);
      });
      df.spawn(mote::in(in), [&] { seen = in; });
      df.wait();
    });
    polls = mote::mpi::get_stats().polls - before;
    EXPECT_EQ(seen, 5);
  } else {
    int go = 0;
    MPI_Recv(&go, 1, MPI_INT, partner(), 852, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the late peer
    MPI_Send(&out, 1, MPI_INT, partner(), 851, MPI_COMM_WORLD);
  }
  // 300 ms at one poll per millisecond per worker is 600; at the busy
  // interval (50 us) it is 12000, and a spinning worker polls more still.
  if (receiver) {
    EXPECT_LT(polls, 1500u) << "polls while one receive waited 300 ms";
  }
}

// Placement: the ranks on one node share its CPUs without overlap. A
// runtime of one worker per rank: the ranks whose affinity masks overlap
// put at most ceil(ranks / CPUs) workers on any CPU of their mask, and
// every worker (this one's and the test runtime's) runs within its
// process's mask.
TEST_F(Mpi, RanksShareTheNodeWithoutOverlap) {
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  int local = 0, locals = 1;
  MPI_Comm_rank(node, &local);
  MPI_Comm_size(node, &locals);
  mote::runtime_options o;
  o.num_workers = 1;
  o.spin = std::chrono::microseconds(20);
  mote::runtime one(o);
  int cpu = -1;
  attached_to(one, [&] { cpu = one.worker_cpus().at(0); });
  cpu_set_t mask;
  CPU_ZERO(&mask);
  sched_getaffinity(0, sizeof mask, &mask);
  EXPECT_TRUE(cpu >= 0 && CPU_ISSET(cpu, &mask)) << "worker on cpu " << cpu << ", outside the process's mask";
  for (int c : g_rt->worker_cpus()) EXPECT_TRUE(c >= 0 && CPU_ISSET(c, &mask)) << "worker on cpu " << c;
  // Every rank's mask (as the CPUs' bits) and worker CPU.
  constexpr int kCpus = 1024;
  std::vector<unsigned char> mine(kCpus, 0), all(static_cast<std::size_t>(kCpus) * locals);
  for (int c = 0; c < kCpus; ++c) mine[c] = CPU_ISSET(c, &mask) ? 1 : 0;
  std::vector<int> cpus(locals);
  MPI_Allgather(mine.data(), kCpus, MPI_UNSIGNED_CHAR, all.data(), kCpus, MPI_UNSIGNED_CHAR, node);
  MPI_Allgather(&cpu, 1, MPI_INT, cpus.data(), 1, MPI_INT, node);
  MPI_Comm_free(&node);
  // The ranks whose mask overlaps this one's, and the CPUs of their masks.
  std::vector<int> on(kCpus, 0);
  int sharing = 0, mask_cpus = 0;
  for (int c = 0; c < kCpus; ++c) mask_cpus += mine[c];
  for (int r = 0; r < locals; ++r) {
    bool overlaps = false;
    for (int c = 0; c < kCpus; ++c) overlaps = overlaps || (mine[c] && all[static_cast<std::size_t>(r) * kCpus + c]);
    if (!overlaps) continue;
    ++sharing;
    if (cpus[r] >= 0 && cpus[r] < kCpus) ++on[cpus[r]];
  }
  const int limit = (sharing + mask_cpus - 1) / mask_cpus;
  for (int c = 0; c < kCpus; ++c) {
    if (mine[c]) {
      EXPECT_LE(on[c], limit) << "cpu " << c << " holds " << on[c] << " of " << sharing << " ranks' workers";
    }
  }
}

// What a message task of each kind looks like (one closure type each, so
// that every call spawns the same kind of task).
void spawn_receive(mote::dataflow& df, int* buf, int tag, std::atomic<int>* seq, int* pos) {
  df.spawn(mote::out(*buf), [=] {
    *pos = seq->fetch_add(1, std::memory_order_relaxed);
    MPI_Request r;
    MPI_Irecv(buf, 1, MPI_INT, partner(), tag, MPI_COMM_WORLD, &r);
    mote::mpi::iwait(r);
  });
}
void spawn_send(mote::dataflow& df, const int* buf, int tag, std::atomic<int>* seq, int* pos) {
  df.spawn(mote::in(*buf), [=] {
    *pos = seq->fetch_add(1, std::memory_order_relaxed);
    MPI_Request r;
    MPI_Isend(buf, 1, MPI_INT, partner(), tag, MPI_COMM_WORLD, &r);
    mote::mpi::iwait(r);
  });
}

// Message tasks do not starve behind compute tasks that became ready after
// them (one worker, whose pool runs the newest first): a receive ready at
// its spawn, and a send with the task that feeds it, run before 200
// compute tasks that a common predecessor readies. The kinds of message
// task are learned from a first round (a task whose body called iwait).
TEST_F(Mpi, MessageTasksRunBeforeLaterComputeTasks) {
  if (!paired()) GTEST_SKIP();
  mote::runtime_options o;
  o.num_workers = 1;
  o.spin = std::chrono::microseconds(20);
  mote::runtime one(o);
  constexpr int kCompute = 200;
  std::atomic<int> seq{0};
  int first_in = -1, first_out = 1, in = -1, x = 0, y = 0;
  int pos_r = -1, pos_s = -1, pos_f = -1, unused = 0;
  std::vector<int> pos_c(kCompute, -1);
  attached_to(one, [&] {
    one.run([&] {
      mote::dataflow df;
      spawn_receive(df, &first_in, 861, &seq, &unused);  // learn the kinds
      spawn_send(df, &first_out, 861, &seq, &unused);
      df.wait();
      seq.store(0);
      spawn_receive(df, &in, 862, &seq, &pos_r);
      df.spawn(mote::out(x), [&] { x = 1; });
      df.spawn(mote::in(x), mote::out(y), [&] {
        pos_f = seq.fetch_add(1, std::memory_order_relaxed);
        y = g_rank;
      });
      for (int i = 0; i < kCompute; ++i) {
        df.spawn(mote::in(x), [&, i] {
          pos_c[i] = seq.fetch_add(1, std::memory_order_relaxed);
          volatile double s = 0;
          for (int k = 0; k < 200; ++k) s = s + k;
        });
      }
      spawn_send(df, &y, 862, &seq, &pos_s);
      df.wait();
    });
  });
  EXPECT_EQ(first_in, 1);
  EXPECT_EQ(in, partner());
  const int first_compute = *std::min_element(pos_c.begin(), pos_c.end());
  EXPECT_LT(pos_r, first_compute) << "the receive ran after compute tasks readied after it";
  EXPECT_LT(pos_f, first_compute) << "the task that feeds the send ran after compute tasks";
  EXPECT_LT(pos_s, first_compute) << "the send ran after compute tasks readied with it";
}

// The service polls right after a task that started a transfer (bound it
// with iwait), not only at the busy interval (200 ms here) or when idle.
TEST_F(Mpi, PollRightAfterATaskStartsATransfer) {
  if (!paired()) GTEST_SKIP();
  mote::runtime_options o;
  o.num_workers = 1;
  o.spin = std::chrono::microseconds(20);
  mote::runtime one(o);
  int in = -1;
  const int out = 40 + g_rank;
  std::uint64_t after_iwait = 0, next_task = 0;
  std::thread sender = send_after_go(&out, 1, 871, 872);
  setenv("MOTE_MPI_POLL_US", "200000", 1);
  attached_to(one, [&] {
    unsetenv("MOTE_MPI_POLL_US");
    one.run([&] {
      mote::dataflow df;
      // Spawned first: the pool runs the newest first, the receive.
      df.spawn([&] { next_task = mote::mpi::get_stats().polls; });
      df.spawn(mote::out(in), [&] {
        MPI_Request r;
        MPI_Irecv(&in, 1, MPI_INT, partner(), 871, MPI_COMM_WORLD, &r);
        mote::mpi::iwait(r);
        after_iwait = mote::mpi::get_stats().polls;
        send_go(872);
      });
      df.wait();
    });
  });
  sender.join();
  EXPECT_EQ(in, 40 + partner());
  EXPECT_GT(next_task, after_iwait) << "no poll between the task that started the receive and the next task";
}

// A chain of tasks that each ready the next (run at once on the same worker,
// which then does not return to its loop between them) does not hide a
// transfer from the service: the busy worker polls between the chain's
// tasks too, so a receive that completes meanwhile is seen while the chain
// runs, not after it (MPI's halo tasks waited behind such chains).
TEST_F(Mpi, PollBetweenImmediateSuccessors) {
  if (!paired()) GTEST_SKIP();
  mote::runtime_options o;
  o.num_workers = 1;
  o.spin = std::chrono::microseconds(20);
  mote::runtime one(o);
  constexpr int kChain = 500;
  int in = -1;
  const int out = 60 + g_rank;
  int seen_at = -1;
  std::thread sender = send_after_go(&out, 1, 891, 892);
  attached_to(one, [&] {
    one.run([&] {
      mote::dataflow df;
      const std::uint64_t before = mote::mpi::get_stats().requests;
      int link = 0;
      // Each link looks for the receive's completion for up to 2 ms; the
      // data is on its way once the receive task has run.
      for (int i = 0; i < kChain; ++i) {
        df.spawn(mote::inout(link), [&, i] {
          if (seen_at >= 0) return;
          const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
          while (std::chrono::steady_clock::now() < until) {
            const mote::mpi::stats st = mote::mpi::get_stats();
            if (st.requests > before && st.outstanding == 0) {
              seen_at = i;
              return;
            }
          }
        });
      }
      // Spawned last: the pool runs the newest first, the receive, then the
      // chain's head, whose end readies the next link, and so on.
      df.spawn(mote::out(in), [&] {
        MPI_Request r;
        MPI_Irecv(&in, 1, MPI_INT, partner(), 891, MPI_COMM_WORLD, &r);
        mote::mpi::iwait(r);
        send_go(892);
      });
      df.wait();
    });
  });
  sender.join();
  EXPECT_EQ(in, 60 + partner());
  EXPECT_GE(seen_at, 0) << "the receive completed unseen while a chain of " << kChain << " tasks ran";
  EXPECT_LT(seen_at, kChain - 1);
}

// Turns a hang into a failure: after the limit, every rank aborts the job.
class watchdog {
 public:
  explicit watchdog(int seconds)
      : thread_([this, seconds] {
          std::unique_lock<std::mutex> lock(m_);
          if (!cv_.wait_for(lock, std::chrono::seconds(seconds), [&] { return done_; })) {
            std::fprintf(stderr, "rank %d: watchdog: the tests did not finish in %d s\n", g_rank, seconds);
            MPI_Abort(MPI_COMM_WORLD, 3);
          }
        }) {}
  ~watchdog() {
    {
      std::lock_guard<std::mutex> lock(m_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  mote::runtime_options o;
  o.num_workers = 2;
  o.spin = std::chrono::microseconds(20);
  mote::runtime rt(o);
  g_rt = &rt;
  try {
    mote::mpi::init(&argc, &argv, rt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mote::mpi::init: %s\n", e.what());
    return 1;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  // One rank's report is enough when all pass; every rank reports failures.
  if (g_rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int failed = 0;
  {
    watchdog dog(kScale == 1 ? 60 : 150);
    failed = RUN_ALL_TESTS();
  }
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (failed != 0) std::fprintf(stderr, "rank %d: tests failed\n", g_rank);
  mote::mpi::finalize();
  return any;
}
