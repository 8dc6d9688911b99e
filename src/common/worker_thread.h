// A thread started ahead of the work it will do. A thread created at the moment its work is ready
// is often placed on the creator's CPU and waits there, milliseconds at a time, while the creator
// runs a long system call (the verifier); a thread that is already running and is woken is put
// on an idle CPU. Jobs run one at a time, in order.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace fay {

class WorkerThread {
 public:
  WorkerThread() : thread_([this] { Loop(); }) {}
  ~WorkerThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  WorkerThread(const WorkerThread&) = delete;
  WorkerThread& operator=(const WorkerThread&) = delete;

  // Runs `job` on the thread; the previous job must have been waited for.
  void Submit(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = std::move(job);
      busy_ = true;
    }
    cv_.notify_all();
  }
  // Returns once the submitted job (if any) has finished.
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !busy_; });
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || busy_; });
      if (!busy_) return;  // stopping, and a job given before the stop has run
      std::function<void()> job = std::move(job_);
      lock.unlock();
      job();
      lock.lock();
      busy_ = false;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace fay
