// What a hostile or broken peer can send an agent: bytes that are no message, a message cut
// short, one past the size limit, another protocol version, a request no coordinator sends.
// Each gets an error naming the problem, and the agent goes on serving.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "cluster/agent.h"
#include "cluster/channel.h"
#include "cluster/node.h"
#include "fay_cluster.grpc.pb.h"

namespace fay::cluster {
namespace {

class AgentHostileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    opt_.name = "hostile-test";
    opt_.tls.insecure = true;
    service_ = MakeAgentService(opt_);
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    ConfigureServer(&b);
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    ASSERT_TRUE(server_ && port_ > 0);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                   grpc::InsecureChannelCredentials());
  }
  void TearDown() override { server_->Shutdown(); }

  // Sends `bytes` as the whole request of Run, unchecked; the call's status and any reply.
  grpc::Status RawRun(const std::string& bytes, pb::WindowState* reply) {
    grpc::GenericStub stub(channel_);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::CompletionQueue cq;
    auto call = stub.PrepareCall(&ctx, "/fay.cluster.v1.Agent/Run", &cq);
    void* tag;
    bool ok;
    call->StartCall(reinterpret_cast<void*>(1));
    cq.Next(&tag, &ok);
    grpc::Slice slice(bytes);
    grpc::ByteBuffer buf(&slice, 1);
    call->WriteLast(buf, grpc::WriteOptions(), reinterpret_cast<void*>(2));
    cq.Next(&tag, &ok);
    grpc::ByteBuffer in;
    call->Read(&in, reinterpret_cast<void*>(3));
    cq.Next(&tag, &ok);
    if (ok) {
      std::vector<grpc::Slice> slices;
      (void)in.Dump(&slices);
      std::string got;
      for (auto& s : slices) got.append(reinterpret_cast<const char*>(s.begin()), s.size());
      reply->ParseFromString(got);
    }
    grpc::Status st;
    call->Finish(&st, reinterpret_cast<void*>(4));
    cq.Next(&tag, &ok);
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
    return st;
  }

  pb::QueryRequest Valid() {
    pb::QueryRequest r;
    r.set_version(kProtocolVersion);
    r.set_query_id("q1");
    r.set_query("syscall:getppid | count()");
    r.set_start_unix_ns(RealtimeNs());
    r.set_every_ns(1'000'000'000);
    r.set_for_ns(1'000'000'000);
    r.set_deadline_ns(500'000'000);
    r.set_address("127.0.0.1:1");
    return r;
  }

  // The agent still answers: Status, with the last error it noted.
  std::string StillServing() {
    auto stub = pb::Agent::NewStub(channel_);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    pb::StatusRequest req;
    req.set_version(kProtocolVersion);
    pb::StatusReply rep;
    grpc::Status st = stub->Status(&ctx, req, &rep);
    EXPECT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(rep.name(), "hostile-test");
    return rep.last_error();
  }

  AgentOptions opt_;
  std::unique_ptr<grpc::Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  int port_ = 0;
};

TEST_F(AgentHostileTest, BytesThatAreNoMessageAreRefused) {
  pb::WindowState reply;
  grpc::Status st = RawRun(std::string("\xff\xff\xff\xff\x0f garbage", 13), &reply);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INTERNAL) << st.error_message();
  StillServing();
}

TEST_F(AgentHostileTest, AMessageCutShortIsRefused) {
  std::string bytes = Valid().SerializeAsString();
  pb::WindowState reply;
  grpc::Status st = RawRun(bytes.substr(0, bytes.size() - 3), &reply);
  EXPECT_FALSE(st.ok());
  StillServing();
}

TEST_F(AgentHostileTest, AMessageOverTheLimitIsRefused) {
  pb::QueryRequest r = Valid();
  r.set_query(std::string(2 << 20, 'x'));  // 2 MiB; requests are limited to 1 MiB
  pb::WindowState reply;
  grpc::Status st = RawRun(r.SerializeAsString(), &reply);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << st.error_message();
  StillServing();
}

TEST_F(AgentHostileTest, AnotherVersionIsNamedWithBoth) {
  pb::QueryRequest r = Valid();
  r.set_version(7);
  pb::WindowState reply;
  grpc::Status st = RawRun(r.SerializeAsString(), &reply);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(st.error_message(), "the caller speaks cluster protocol version 7, this agent 3");
  StillServing();
}

TEST_F(AgentHostileTest, RequestsNoCoordinatorSendsAreRefusedWithTheField) {
  struct Case {
    std::function<void(pb::QueryRequest*)> spoil;
    std::string says;
  };
  std::vector<Case> cases = {
      {[](pb::QueryRequest* r) { r->set_start_unix_ns(UINT64_MAX - 5); }, "its start is"},
      {[](pb::QueryRequest* r) { r->set_start_unix_ns(1); }, "its start is"},
      {[](pb::QueryRequest* r) { r->set_deadline_ns(3'600'000'000'000); }, "deadline"},
      {[](pb::QueryRequest* r) {
         r->add_subtree("127.0.0.1:2");
         r->set_fanout(0);
       },
       "fanout 0"},
      {[](pb::QueryRequest* r) { r->set_first_window(UINT64_MAX); }, "first window"},
      {[](pb::QueryRequest* r) { r->set_query(std::string(70000, ' ')); }, "bytes of query"},
  };
  for (const Case& c : cases) {
    pb::QueryRequest r = Valid();
    c.spoil(&r);
    pb::WindowState reply;
    grpc::Status st = RawRun(r.SerializeAsString(), &reply);
    EXPECT_TRUE(st.ok()) << st.error_message();
    EXPECT_NE(reply.error().find("a request no coordinator sends: "), std::string::npos)
        << reply.error();
    EXPECT_NE(reply.error().find(c.says), std::string::npos) << reply.error();
    EXPECT_EQ(StillServing(), reply.error());
  }
}

}  // namespace
}  // namespace fay::cluster
