// The first stage's way to end a stream, shared by mote::parallel_pipeline
// (mote/pipeline.hpp) and mote::stream_graph (mote/stream_graph.hpp).
#pragma once

namespace mote {

// Passed to the first stage of a pipeline, or to a streaming task with no
// inputs: stop() ends the stream (the value returned with it is dropped).
//
//   [&](mote::flow_control& fc) { if (done()) { fc.stop(); return 0; } return next(); }
class flow_control {
 public:
  void stop() noexcept { stopped_ = true; }
  bool stopped() const noexcept { return stopped_; }

 private:
  bool stopped_ = false;
};

}  // namespace mote
