#include "common/worker_thread.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace fay {
namespace {

TEST(WorkerThread, RunsEachJobOnItsOwnThreadAndWaitReturnsAfterIt) {
  WorkerThread worker;
  std::vector<int> done;
  std::thread::id where;
  worker.Submit([&] {
    where = std::this_thread::get_id();
    done.push_back(1);
  });
  worker.Wait();
  EXPECT_NE(where, std::this_thread::get_id());
  worker.Submit([&] { done.push_back(2); });
  worker.Wait();
  EXPECT_EQ(done, (std::vector<int>{1, 2}));
}

TEST(WorkerThread, WaitWithoutAJobReturnsAtOnce) {  // fails by hanging (the test timeout)
  WorkerThread worker;
  worker.Wait();
}

TEST(WorkerThread, ADestroyedWorkerStillRunsTheJobItWasGiven) {
  int ran = 0;
  {
    WorkerThread worker;
    worker.Submit([&] { ran = 7; });
  }
  EXPECT_EQ(ran, 7);
}

}  // namespace
}  // namespace fay
