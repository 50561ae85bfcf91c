// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/rendezvous.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "base/errno_string.h"
#include "base/log.h"
#include "base/rank_list.h"
#include "base/unique_fd.h"
#include "bootstrap/socket_io.h"
#include "bootstrap/wait_fd.h"

namespace hzc::bootstrap {

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

constexpr uint32_t kMaxMessage = 1U << 20;
// How long the root thread has to answer every rank once the rendezvous is decided.
constexpr std::chrono::seconds kAnswerTime{5};

Status SendJson(int fd, const json &msg, Clock::time_point deadline) {
  const std::string body = msg.dump();
  const uint32_t len = htonl(static_cast<uint32_t>(body.size()));
  HZC_RETURN_IF_ERROR(SendAll(fd, &len, sizeof(len), deadline));
  return SendAll(fd, body.data(), body.size(), deadline);
}

Expected<json> RecvJson(int fd, Clock::time_point deadline) {
  uint32_t len = 0;
  HZC_RETURN_IF_ERROR(RecvAll(fd, &len, sizeof(len), deadline));
  len = ntohl(len);
  if (len == 0 || len > kMaxMessage) {
    return Error(HCCL_E_TCP_TRANSFER, "bad message length {}", len);
  }
  std::string body(len, '\0');
  HZC_RETURN_IF_ERROR(RecvAll(fd, body.data(), len, deadline));
  json msg = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (msg.is_discarded() || !msg.is_object()) {
    return Error(HCCL_E_TCP_TRANSFER, "malformed message");
  }
  return msg;
}

struct Joined {
  UniqueFd fd;
  RankIdentity peer;
};

// A rendezvous this process serves. Its ranks in this process wait in Join until the root
// thread has answered every rank: the process must not end (and the thread with it) while a
// table is on its way to another rank.
struct Serving {
  pid_t owner = 0;          // the process whose thread serves it (not a forked child)
  bool done = false;        // every rank was answered, or could not be
  std::string undelivered;  // why some rank did not get the table; empty if all did
};

struct ServingRegistry {
  std::mutex mutex;
  std::condition_variable answered;
  std::map<std::string, std::shared_ptr<Serving>> by_id;  // until the thread is done
};

ServingRegistry &Servings() {
  static ServingRegistry *const registry = new ServingRegistry();  // outlives the threads
  return *registry;
}

std::shared_ptr<Serving> AddServing(const std::string &uid) {
  auto serving = std::make_shared<Serving>();
  serving->owner = getpid();
  ServingRegistry &reg = Servings();
  std::lock_guard lock(reg.mutex);
  reg.by_id[uid] = serving;
  return serving;
}

// The rendezvous @uid if this process serves it and is not done with it, else null.
std::shared_ptr<Serving> FindServing(const std::string &uid) {
  ServingRegistry &reg = Servings();
  std::lock_guard lock(reg.mutex);
  auto it = reg.by_id.find(uid);
  return it == reg.by_id.end() || it->second->owner != getpid() ? nullptr : it->second;
}

void FinishServing(const std::string &uid, Serving &serving, std::string undelivered) {
  ServingRegistry &reg = Servings();
  {
    std::lock_guard lock(reg.mutex);
    serving.done = true;
    serving.undelivered = std::move(undelivered);
    // A later rendezvous of the same id (a rank table's, served again) may have replaced it.
    if (auto it = reg.by_id.find(uid); it != reg.by_id.end() && it->second.get() == &serving) {
      reg.by_id.erase(it);
    }
  }
  reg.answered.notify_all();
}

// Wait until the root thread answered every rank, at most until @deadline.
Status WaitAnswered(const Serving &serving, Clock::time_point deadline) {
  ServingRegistry &reg = Servings();
  std::unique_lock lock(reg.mutex);
  if (!reg.answered.wait_until(lock, deadline, [&] { return serving.done; })) {
    return Error(HCCL_E_TIMEOUT, "this process's root thread did not answer every rank in time");
  }
  if (!serving.undelivered.empty()) {
    return Error(HCCL_E_TCP_TRANSFER, "{}", serving.undelivered);
  }
  return Status::Ok();
}

// Refuse a rank at its hello (it is not counted), or (@joined) tell a counted rank that the
// rendezvous failed.
void RefuseRank(int fd, HcclResult code, const std::string &why, bool joined = false,
                Clock::time_point deadline = Clock::now() + std::chrono::seconds(2)) {
  (void)SendJson(fd, json{{"code", code}, {"error", why}, {"joined", joined}}, deadline);
}

// Send the table of all ranks to every rank; why some rank did not get it, or "".
std::string SendTable(const std::map<uint32_t, Joined> &joined, uint32_t nranks,
                      const std::string &where) {
  const auto deadline = Clock::now() + kAnswerTime;
  json table = json::array();
  for (const auto &[r, j] : joined) {
    table.push_back({{"host", j.peer.host}, {"pid", j.peer.pid}, {"address", j.peer.address}});
  }
  const json reply{{"code", 0}, {"ranks", table}};
  std::map<uint32_t, std::string> failed;
  for (const auto &[r, j] : joined) {
    if (Status st = SendJson(j.fd.get(), reply, deadline); !st.ok()) {
      failed[r] = st.message();
    }
  }
  if (failed.empty()) {
    LogDebug("bootstrap: root {}: {} ranks joined", where, nranks);
    return "";
  }
  const std::string why =
      fmt::format("rank(s) {} of {} did not get the rank table (rank {}: {})",
                  RanksWhere(nranks, [&](uint32_t r) { return failed.contains(r); }), nranks,
                  failed.begin()->first, failed.begin()->second);
  LogError("bootstrap: root {}: {}", where, why);
  return why;
}

// The root thread: one rendezvous, then exit; why some rank did not get the table, or "".
std::string ServeRootOnce(UniqueFd listener, RootInfo info, std::chrono::seconds timeout) {
  const std::string uid = IdString(info.id);
  const std::string where = info.AddressString();
  std::map<uint32_t, Joined> joined;
  uint32_t nranks = 0;
  // Before anyone arrives, wait long; from the first hello on, the connect timeout.
  auto deadline =
      Clock::now() + std::max<std::chrono::seconds>(timeout * 10, std::chrono::seconds(600));
  while (nranks == 0 || joined.size() < nranks) {
    auto ready = WaitFd(listener.get(), POLLIN, deadline);
    if (!ready.ok() || !*ready) {
      break;
    }
    UniqueFd conn(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn.valid()) {
      continue;
    }
    auto hello = RecvJson(conn.get(), std::min(deadline, Clock::now() + std::chrono::seconds(5)));
    if (!hello.ok()) {
      LogWarn("bootstrap: root {}: dropped a connection: {}", where, hello.status().message());
      continue;
    }
    const json &h = *hello;
    if (h.value("uid", "") != uid) {
      // "foreign": a rank of a rank table waits for its own rendezvous on the table's port.
      (void)SendJson(conn.get(),
                     json{{"code", HCCL_E_PARA},
                          {"error",
                           "the rendezvous is of another communicator (rootInfo from "
                           "another HcclGetRootInfo, or another rank table's)"},
                          {"foreign", true}},
                     Clock::now() + std::chrono::seconds(2));
      continue;
    }
    const uint32_t n = h.value("nranks", 0U);
    const uint32_t r = h.value("rank", UINT32_MAX);
    if (nranks == 0) {
      nranks = n;
      deadline = Clock::now() + timeout;
    }
    if (n != nranks) {
      RefuseRank(conn.get(), HCCL_E_PARA,
                 fmt::format("nRanks={} differs from nRanks={} of the other ranks", n, nranks));
      continue;
    }
    if (r >= nranks || joined.contains(r)) {
      RefuseRank(conn.get(), HCCL_E_PARA,
                 fmt::format("rank={} is out of range or already joined", r));
      continue;
    }
    joined[r] = Joined{std::move(conn), RankIdentity{h.value("host", ""), h.value("pid", 0U),
                                                     h.value("address", "")}};
  }
  if (nranks != 0 && joined.size() == nranks) {
    return SendTable(joined, nranks, where);
  }
  const std::string missing = RanksWhere(nranks, [&](uint32_t r) { return !joined.contains(r); });
  const std::string why = nranks == 0 ? std::string("no rank arrived")
                                      : fmt::format("rank(s) {} of {} did not arrive within {}s",
                                                    missing, nranks, timeout.count());
  LogError("bootstrap: root {}: rendezvous failed: {}", where, why);
  const auto answer_deadline = Clock::now() + kAnswerTime;
  for (auto &[r, j] : joined) {
    RefuseRank(j.fd.get(), HCCL_E_TIMEOUT, why, true, answer_deadline);
  }
  return "";  // every rank that came has its error
}

void ServeRoot(UniqueFd listener, RootInfo info, std::chrono::seconds timeout,
               std::shared_ptr<Serving> serving) {
  std::string undelivered;
  try {
    undelivered = ServeRootOnce(std::move(listener), info, timeout);
  } catch (const std::exception &e) {
    LogError("bootstrap: root {}: internal error: {}", info.AddressString(), e.what());
    undelivered = fmt::format("internal error: {}", e.what());
  }
  FinishServing(IdString(info.id), *serving, std::move(undelivered));
}

// A connection to the root, retried until @deadline (the root may not listen yet).
Expected<UniqueFd> Connect(const RootInfo &root, Clock::time_point deadline,
                           std::chrono::seconds timeout) {
  int last_err = 0;
  while (Clock::now() < deadline) {
    UniqueFd fd(socket(root.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      return Error(HCCL_E_TCP_CONNECT, "socket failed: {}", ErrnoString(errno));
    }
    if (connect(fd.get(), reinterpret_cast<const sockaddr *>(&root.addr), AddrLen(root.addr)) ==
        0) {
      return fd;
    }
    last_err = errno;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return Error(HCCL_E_TCP_CONNECT, "cannot reach the root at {} within {}s: {}",
               root.AddressString(), timeout.count(), ErrnoString(last_err));
}

// How the root took a rank's hello.
struct Outcome {
  bool joined = false;    // it counted the rank (sent the table, or the rendezvous failed)
  bool foreign = false;   // it serves another communicator's rendezvous
  bool answered = false;  // it answered at all (else it went away, or never came)
};

// Send this rank's hello and receive the table of all ranks.
Expected<std::vector<RankIdentity>> Exchange(const RootInfo &root, uint32_t nranks, uint32_t rank,
                                             const RankIdentity &self, Clock::time_point deadline,
                                             std::chrono::seconds timeout, Outcome *outcome) {
  const std::string where = root.AddressString();
  auto fd = Connect(root, deadline, timeout);
  if (!fd.ok()) {
    return fd.status();
  }
  const json hello = {{"uid", IdString(root.id)}, {"nranks", nranks}, {"rank", rank},
                      {"host", self.host},        {"pid", self.pid},  {"address", self.address}};
  if (Status st = SendJson(fd->get(), hello, deadline); !st.ok()) {
    return Error(st.code(), "root {}: {}", where, st.message());
  }
  auto reply = RecvJson(fd->get(), deadline);
  if (!reply.ok()) {
    return Error(reply.status().code(), "root {}: {}", where, reply.status().message());
  }
  const json &r = *reply;
  const int code = r.value("code", static_cast<int>(HCCL_E_INTERNAL));
  outcome->answered = true;
  outcome->joined = code == 0 || r.value("joined", false);
  outcome->foreign = r.value("foreign", false);
  if (code != 0) {
    return Error(static_cast<HcclResult>(code), "root {}: {}", where,
                 r.value("error", std::string("refused")));
  }
  const json ranks = r.value("ranks", json::array());
  if (!ranks.is_array() || ranks.size() != nranks) {
    return Error(HCCL_E_TCP_TRANSFER, "root {}: malformed rank table", where);
  }
  std::vector<RankIdentity> peers;
  for (const auto &p : ranks) {
    peers.push_back(RankIdentity{p.value("host", ""), p.value("pid", 0U), p.value("address", "")});
  }
  return peers;
}

// The outcome of Join: @table, unless this process serves the rendezvous and its thread failed to
// answer another rank; waits for that thread when it counted this rank.
Expected<std::vector<RankIdentity>> Answered(const RootInfo &root,
                                             const std::shared_ptr<Serving> &serving,
                                             const Outcome &outcome,
                                             Expected<std::vector<RankIdentity>> table,
                                             Clock::time_point deadline) {
  if (serving != nullptr && outcome.joined) {
    // The thread answers within kAnswerTime of its own deadline, which is at most this one.
    Status answered = WaitAnswered(*serving, deadline + kAnswerTime);
    if (table.ok() && !answered.ok()) {
      return Error(answered.code(), "root {}: {}", root.AddressString(), answered.message());
    }
  }
  return table;
}

}  // namespace

Expected<RootInfo> StartRoot(const std::string &address, std::chrono::seconds timeout) {
  auto id = RandomId();
  if (!id.ok()) {
    return id.status();
  }
  return StartRootAt(address.empty() ? DefaultAddress() : address, 0, *id, timeout);
}

Expected<RootInfo> RootAt(const std::string &address, uint16_t port, const UniqueId &id) {
  auto addr = ParseAddress(address);
  if (!addr.ok()) {
    return addr.status();
  }
  static_assert(offsetof(sockaddr_in, sin_port) == offsetof(sockaddr_in6, sin6_port));
  reinterpret_cast<sockaddr_in *>(&*addr)->sin_port = htons(port);
  RootInfo info;
  info.addr = *addr;
  info.id = id;
  return info;
}

Expected<RootInfo> StartRootAt(const std::string &address, uint16_t port, const UniqueId &id,
                               std::chrono::seconds timeout) {
  auto at = RootAt(address, port, id);
  if (!at.ok()) {
    return at.status();
  }
  const sockaddr_storage addr = at->addr;
  RootInfo info = *at;
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    bool in_use = false;
    auto fd = ListenOn(addr, /*reuse=*/port != 0, &info.addr, &in_use);
    if (fd.ok()) {
      std::thread(ServeRoot, std::move(*fd), info, timeout, AddServing(IdString(info.id))).detach();
      break;
    }
    if (!in_use || Clock::now() >= deadline) {
      return Error(fd.status().code(), "{}{}", fd.status().message(),
                   in_use ? fmt::format(" (still in use after {}s)", timeout.count()) : "");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  LogInfo("bootstrap: root listening on {} for communicator {}", info.AddressString(),
          IdString(info.id));
  return info;
}

Expected<std::vector<RankIdentity>> Join(const RootInfo &root, uint32_t nranks, uint32_t rank,
                                         const RankIdentity &self, std::chrono::seconds timeout,
                                         bool shared_port) {
  const auto deadline = Clock::now() + timeout + std::chrono::seconds(2);
  for (;;) {
    // Looked up before the hello: the thread cannot be done with this rank before it came.
    const std::shared_ptr<Serving> serving = FindServing(IdString(root.id));
    Outcome outcome;
    auto table = Exchange(root, nranks, rank, self, deadline, timeout, &outcome);
    // On a shared port, another communicator's root may have it now (it refuses this rank, or
    // ends with this rank's connection still waiting for it).
    if (shared_port && (outcome.foreign || !outcome.answered) && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    return Answered(root, serving, outcome, std::move(table), deadline);
  }
}

}  // namespace hzc::bootstrap
