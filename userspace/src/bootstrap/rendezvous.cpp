// SPDX-License-Identifier: Apache-2.0
#include "bootstrap/rendezvous.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include "base/errno_string.h"
#include "base/fd_limit.h"
#include "base/log.h"
#include "base/rank_list.h"
#include "base/unique_fd.h"
#include "bootstrap/socket_io.h"

namespace hzc::bootstrap {

namespace {

using Clock = std::chrono::steady_clock;
using json = nlohmann::json;

// The largest message: the table of all ranks the root sends.
constexpr uint32_t kMaxMessage = 1U << 20;
// The largest hello (a few hundred bytes today; room for fields to come).
constexpr uint32_t kMaxHello = 64U << 10;
// The longest string a hello's field may hold (host identity, address).
constexpr size_t kMaxField = 1024;
// How long the root thread has to answer every rank once the rendezvous is decided.
constexpr std::chrono::seconds kAnswerTime{5};
// How long an accepted connection has to send its hello (each its own: see HelloReader).
constexpr std::chrono::seconds kHelloTime{5};
// Connections that may wait for their hello at once (see HelloReader for why the oldest goes
// beyond that): each costs a descriptor and at most kMaxHello bytes.
constexpr size_t kMaxPending = 128;
// The version of the hello ("hzc"): 2 since root and rank prove the key.
constexpr int64_t kHelloVersion = 2;
// What the proofs of each side are labelled with, so that one side's proof is never the other's.
constexpr std::string_view kRootProof = "hzc-rendezvous-root";
constexpr std::string_view kRankProof = "hzc-rendezvous-rank";

std::string Dump(const json &msg) {
  // replace: a string that is not UTF-8 is sent with U+FFFD in its place rather than throw.
  return msg.dump(-1, ' ', false, json::error_handler_t::replace);
}

// A message: its body's length (4 bytes, big endian), then the body.
std::vector<std::byte> Framed(const std::string &body) {
  std::vector<std::byte> message(sizeof(uint32_t) + body.size());
  const uint32_t len = htonl(static_cast<uint32_t>(body.size()));
  std::memcpy(message.data(), &len, sizeof(len));
  std::memcpy(message.data() + sizeof(len), body.data(), body.size());
  return message;
}

Status SendBody(int fd, const std::string &body, Clock::time_point deadline) {
  const std::vector<std::byte> message = Framed(body);
  return SendAll(fd, message.data(), message.size(), deadline);
}

Status SendJson(int fd, const json &msg, Clock::time_point deadline) {
  return SendBody(fd, Dump(msg), deadline);
}

std::span<const uint8_t> Bytes(std::string_view text) {
  return {reinterpret_cast<const uint8_t *>(text.data()), text.size()};
}

// The body of a message read whole (its length word, then JSON).
std::string_view Body(const std::vector<std::byte> &data) {
  return {reinterpret_cast<const char *>(data.data()) + sizeof(uint32_t),
          data.size() - sizeof(uint32_t)};
}

// A JSON object from the bytes of a message's body; HCCL_E_TCP_TRANSFER otherwise.
Expected<json> ParseObject(std::string_view body) {
  json msg = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (msg.is_discarded()) {
    return Error(HCCL_E_TCP_TRANSFER, "not JSON");
  }
  if (!msg.is_object()) {
    return Error(HCCL_E_TCP_TRANSFER, "a JSON {}, not an object", msg.type_name());
  }
  return msg;
}

// *@lost (if not null): the connection failed (it ended, or a socket error), not the message.
Expected<json> RecvJson(int fd, Clock::time_point deadline, bool *lost = nullptr) {
  uint32_t len = 0;
  auto recv_all = [&](void *to, size_t n) {
    Status st = RecvAll(fd, to, n, deadline);
    if (lost != nullptr) {
      *lost = !st.ok() && st.code() != HCCL_E_TIMEOUT;
    }
    return st;
  };
  HZC_RETURN_IF_ERROR(recv_all(&len, sizeof(len)));
  len = ntohl(len);
  if (len == 0 || len > kMaxMessage) {
    return Error(HCCL_E_TCP_TRANSFER, "bad message length {}", len);
  }
  std::string body(len, '\0');
  HZC_RETURN_IF_ERROR(recv_all(body.data(), len));
  auto msg = ParseObject(body);
  if (!msg.ok()) {
    return Error(HCCL_E_TCP_TRANSFER, "malformed message: {}", msg.status().message());
  }
  return msg;
}

// Reads the fields of a JSON object that came from a peer, checking each one's type before use,
// so that no input makes nlohmann::json throw. A field absent gives its fallback (an error when
// required), a field of the wrong type gives its fallback and an error; error() is the first
// error. Fields nobody reads are ignored: a later version may add some.
class Fields {
 public:
  explicit Fields(const json &msg) : msg_(msg) {}
  bool ok() const { return error_.empty(); }
  const std::string &error() const { return error_; }

  std::string String(const char *key, bool required, std::string fallback = "") {
    const json *v = Find(key, required, &json::is_string, "a string");
    if (v == nullptr) {
      return fallback;
    }
    const auto &text = v->get_ref<const json::string_t &>();
    if (text.size() > kMaxField) {
      Note(fmt::format("\"{}\" has {} bytes, more than {}", key, text.size(), kMaxField));
      return fallback;
    }
    return text;
  }
  // An integer in [@min, @max] (@max at most INT64_MAX).
  int64_t Int(const char *key, bool required, int64_t min, int64_t max, int64_t fallback) {
    const json *v = Find(key, required, &json::is_number_integer, "an integer");
    if (v == nullptr) {
      return fallback;
    }
    // nlohmann::json keeps an integer >= 0 as unsigned, a negative one as signed.
    const bool unsig = v->is_number_unsigned();
    const bool in_range = unsig ? v->get<uint64_t>() <= static_cast<uint64_t>(max) &&
                                      static_cast<int64_t>(v->get<uint64_t>()) >= min
                                : v->get<int64_t>() >= min && v->get<int64_t>() <= max;
    if (!in_range) {
      Note(fmt::format("\"{}\" is {}, not in [{}, {}]", key, v->dump(), min, max));
      return fallback;
    }
    return unsig ? static_cast<int64_t>(v->get<uint64_t>()) : v->get<int64_t>();
  }
  uint32_t U32(const char *key, bool required, uint32_t fallback = 0) {
    return static_cast<uint32_t>(Int(key, required, 0, UINT32_MAX, fallback));
  }
  bool Bool(const char *key) {
    const json *v = Find(key, false, &json::is_boolean, "a boolean");
    return v != nullptr && v->get<bool>();
  }
  const json *Array(const char *key, bool required) {
    return Find(key, required, &json::is_array, "an array");
  }
  // @size bytes given as hex (required).
  std::string Hex(const char *key, size_t size) {
    const std::string text = String(key, true);
    auto bytes = Unhex(text, size);
    if (!bytes && ok()) {
      Note(fmt::format("\"{}\" is not {} bytes of hex", key, size));
    }
    return bytes.value_or(std::string(size, '\0'));
  }

 private:
  void Note(std::string why) {
    if (error_.empty()) {
      error_ = std::move(why);
    }
  }
  // The field @key if present and @is of its type (@what), else null.
  const json *Find(const char *key, bool required, bool (json::*is)() const noexcept,
                   const char *what) {
    const auto it = msg_.find(key);
    if (it == msg_.end()) {
      if (required) {
        Note(fmt::format("no \"{}\"", key));
      }
      return nullptr;
    }
    if (!((*it).*is)()) {
      const std::string_view type = it->type_name();
      Note(fmt::format("\"{}\" is {} {}, not {}", key,
                       type.find_first_of("aeiou") == 0 ? "an" : "a", type, what));
      return nullptr;
    }
    return &*it;
  }

  const json &msg_;
  std::string error_;
};

// A rank's hello, as the root reads it.
struct RankHello {
  std::string tag;    // PublicId of the communicator's key
  std::string nonce;  // 16 bytes
  uint32_t nranks = 0;
  uint32_t rank = 0;
  RankIdentity identity;
};

// The hello whose JSON is @body; HCCL_E_PARA saying what is wrong with it.
Expected<RankHello> ParseHello(std::string_view body) {
  auto msg = ParseObject(body);
  if (!msg.ok()) {
    return Error(HCCL_E_PARA, "malformed hello: {}", msg.status().message());
  }
  Fields f(*msg);
  if (const auto v = f.Int("hzc", true, 0, INT64_MAX, 0); f.ok() && v != kHelloVersion) {
    return Error(HCCL_E_PARA, "a hello of version {}, this library speaks version {}", v,
                 kHelloVersion);
  }
  RankHello h;
  h.tag = f.String("tag", true);
  h.nonce = f.Hex("nonce", sizeof(Nonce));
  h.nranks = static_cast<uint32_t>(f.Int("nranks", true, 1, UINT32_MAX, 1));
  h.rank = f.U32("rank", true);
  h.identity =
      RankIdentity{f.String("host", false), f.U32("pid", false), f.String("address", false)};
  if (!f.ok()) {
    return Error(HCCL_E_PARA, "malformed hello: {}", f.error());
  }
  return h;
}

// How the root reads hellos: a length word of 1..kMaxHello, then that many bytes.
HelloReader::Options HelloOptions(const std::string &where) {
  HelloReader::Options o;
  o.where = "bootstrap: root " + where;
  o.hello_time = kHelloTime;
  o.max_pending = kMaxPending;
  o.header = sizeof(uint32_t);
  o.size = [](std::span<const std::byte> header) -> Expected<size_t> {
    uint32_t len = 0;
    std::memcpy(&len, header.data(), sizeof(len));
    len = ntohl(len);
    if (len == 0 || len > kMaxHello) {
      return Error(HCCL_E_TCP_TRANSFER, "a hello of {} bytes (1 to {} expected)", len, kMaxHello);
    }
    return sizeof(len) + len;
  };
  // A real rank pushed out by a flood of connections connects again (Join).
  o.evicted = [](int fd) {
    (void)SendJson(fd,
                   json{{"code", HCCL_E_TCP_CONNECT},
                        {"error", fmt::format("more than {} connections waited for the root at "
                                              "once; this one was dropped",
                                              kMaxPending)},
                        {"retry", true}},
                   Clock::now());
  };
  return o;
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
// rendezvous failed. By default it does not wait for the socket: a refusal fits in any fresh
// socket's buffer, and a peer that does not read must not hold up the root.
void RefuseRank(int fd, HcclResult code, const std::string &why, bool joined = false,
                Clock::time_point deadline = Clock::now()) {
  (void)SendJson(fd, json{{"code", code}, {"error", why}, {"joined", joined}}, deadline);
}

// Send the table of all ranks (and the @session id) to every rank, to all at once (a rank that
// is slow to read delays no other); why some rank did not get it, or "".
std::string SendTable(const std::map<uint32_t, Joined> &joined, uint32_t nranks,
                      const UniqueId &session, const std::string &where) {
  const auto deadline = Clock::now() + kAnswerTime;
  json table = json::array();
  for (const auto &[r, j] : joined) {
    table.push_back({{"host", j.peer.host}, {"pid", j.peer.pid}, {"address", j.peer.address}});
  }
  const std::vector<std::byte> message =
      Framed(Dump(json{{"code", 0}, {"ranks", std::move(table)}, {"session", Hex(session)}}));
  std::vector<int> fds;
  for (const auto &[r, j] : joined) {
    fds.push_back(j.fd.get());
  }
  const std::vector<Status> sent = SendToEach(fds, message, deadline);
  std::map<uint32_t, std::string> failed;
  size_t i = 0;
  for (const auto &[r, j] : joined) {
    if (const Status &st = sent[i++]; !st.ok()) {
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

// The ranks counted so far.
struct Roster {
  uint32_t nranks = 0;  // 0 until the first rank of this communicator came
  std::map<uint32_t, Joined> joined;
};

// What the root thread serves: the key the ranks prove, whom it takes, the session id it hands
// out.
struct Served {
  UniqueId key{};
  std::string tag;  // PublicId(key): what a rank's hello names
  Admission admission;
  TrustList trust;
  UniqueId session{};
  std::string where;
};

// The first message of a connection, its hello: refused, or answered with the root's nonce and
// proof and read again for the rank's proof (the hello and the nonce kept in its state).
void Challenge(HelloReader &reader, HelloReader::Hello hello, const Served &s) {
  const int fd = hello.fd.get();
  const std::string_view body = Body(hello.data);
  auto h = ParseHello(body);
  if (!h.ok()) {
    reader.LogDropped(hello.peer, h.status().message());
    RefuseRank(fd, HCCL_E_PARA, h.status().message());
    return;
  }
  if (h->tag != s.tag) {
    // "foreign": a rank of a rank table waits for its own rendezvous on the table's port.
    (void)SendJson(fd,
                   json{{"code", HCCL_E_PARA},
                        {"error",
                         "the rendezvous is of another communicator (rootInfo from "
                         "another HcclGetRootInfo, or another rank table's or job secret's)"},
                        {"foreign", true}},
                   Clock::now());
    return;
  }
  const std::string ip = HostOf(hello.peer);
  std::string why = s.trust.Why(ip);
  if (why.empty() && s.admission.check) {
    why = s.admission.check(h->rank, ip);
  }
  auto nonce = RandomNonce();
  if (why.empty() && !nonce.ok()) {
    why = nonce.status().message();
  }
  if (!why.empty()) {
    reader.LogDropped(hello.peer, why);
    RefuseRank(fd, HCCL_E_PARA, why);
    return;
  }
  const Mac proof = Prove(s.key, kRootProof, {Bytes(h->nonce), *nonce, Bytes(body)});
  // A fresh socket takes the few bytes at once: no wait.
  if (Status st = SendJson(fd, json{{"nonce", Hex(*nonce)}, {"proof", Hex(proof)}}, Clock::now());
      !st.ok()) {
    reader.LogDropped(hello.peer, st.message());
    return;
  }
  hello.state.assign(reinterpret_cast<const char *>(nonce->data()), nonce->size());
  hello.state += body;
  reader.Again(std::move(hello));
}

// The hello of the rank whose proof came in @msg, if the proof holds; else it is refused and
// logged.
std::optional<RankHello> Verify(const HelloReader &reader, const HelloReader::Hello &msg,
                                const Served &s) {
  const std::string_view nonce = std::string_view(msg.state).substr(0, sizeof(Nonce));
  const std::string_view body = std::string_view(msg.state).substr(sizeof(Nonce));
  auto h = ParseHello(body);  // it parsed before
  auto m = ParseObject(Body(msg.data));
  std::string why = m.ok() ? "" : m.status().message();
  if (why.empty()) {
    Fields f(*m);
    const std::string proof = f.Hex("proof", sizeof(Mac));
    const Mac want = Prove(s.key, kRankProof, {Bytes(h->nonce), Bytes(nonce), Bytes(body)});
    why = !f.ok()                        ? f.error()
          : !SameMac(Bytes(proof), want) ? "its proof does not hold: it does not know the "
                                           "communicator's key"
                                         : "";
  }
  if (!why.empty()) {
    why = fmt::format("rank {} not admitted: {}", h->rank, why);
    reader.LogDropped(msg.peer, why);
    RefuseRank(msg.fd.get(), HCCL_E_PARA, why);
    return std::nullopt;
  }
  return std::move(*h);
}

// Take a connection's next message: its hello (Challenge) or its proof. A rank whose proof holds
// is counted, or refused (its connection closes). The first rank counted fixes nranks and starts
// the connect timeout: *@deadline.
void Admit(HelloReader &reader, HelloReader::Hello msg, const Served &s,
           std::chrono::seconds timeout, Roster *roster, Clock::time_point *deadline) {
  if (msg.state.empty()) {
    Challenge(reader, std::move(msg), s);
    return;
  }
  auto h = Verify(reader, msg, s);
  if (!h) {
    return;
  }
  const int fd = msg.fd.get();
  if (roster->nranks == 0) {
    // The root holds every rank's connection until the table is complete.
    if (Status st = ReserveDescriptors(h->nranks, "the root's connections to the ranks");
        !st.ok()) {
      RefuseRank(fd, st.code(), std::string(st.message()));
      return;
    }
    roster->nranks = h->nranks;
    *deadline = Clock::now() + timeout;
  }
  if (h->nranks != roster->nranks) {
    RefuseRank(fd, HCCL_E_PARA,
               fmt::format("nRanks={} differs from nRanks={} of the other ranks", h->nranks,
                           roster->nranks));
    return;
  }
  if (h->rank >= roster->nranks || roster->joined.contains(h->rank)) {
    RefuseRank(fd, HCCL_E_PARA, fmt::format("rank={} is out of range or already joined", h->rank));
    return;
  }
  roster->joined[h->rank] = Joined{std::move(msg.fd), std::move(h->identity)};
}

// The root thread: one rendezvous, then exit; why some rank did not get the table, or "".
// Hellos are read all at once (HelloReader): a connection that sends nothing or garbage costs
// only itself.
std::string ServeRootOnce(UniqueFd listener, const Served &served, std::chrono::seconds timeout) {
  const std::string &where = served.where;
  Roster roster;
  // Before anyone arrives, wait long; from the first rank counted on, the connect timeout.
  auto deadline =
      Clock::now() + std::max<std::chrono::seconds>(timeout * 10, std::chrono::seconds(600));
  auto reader = HelloReader::Open(listener.get(), HelloOptions(where));
  std::string broke = reader.ok() ? "" : reader.status().message();  // why it stopped early
  while (broke.empty() && (roster.nranks == 0 || roster.joined.size() < roster.nranks)) {
    auto hello = reader->Next(deadline);
    if (!hello.ok()) {
      broke = hello.status().message();
    } else if (!hello->has_value()) {
      break;
    } else {
      Admit(*reader, std::move(**hello), served, timeout, &roster, &deadline);
    }
  }
  const uint32_t nranks = roster.nranks;
  const auto &joined = roster.joined;
  if (nranks != 0 && joined.size() == nranks) {
    return SendTable(joined, nranks, served.session, where);
  }
  std::string missing = RanksWhere(nranks, [&](uint32_t r) { return !joined.contains(r); });
  if (const size_t cut = missing.rfind(',', kMaxField / 2); missing.size() > kMaxField / 2) {
    // The answer's error field holds at most kMaxField bytes: the first of them, and how many.
    missing = fmt::format("{},... ({} in all)", missing.substr(0, cut), nranks - joined.size());
  }
  const std::string why = !broke.empty() ? broke
                          : nranks == 0  ? std::string("no rank arrived")
                                         : fmt::format("rank(s) {} of {} did not arrive within {}s",
                                                       missing, nranks, timeout.count());
  LogError("bootstrap: root {}: rendezvous failed: {}", where, why);
  const auto answer_deadline = Clock::now() + kAnswerTime;
  for (auto &[r, j] : joined) {
    RefuseRank(j.fd.get(), broke.empty() ? HCCL_E_TIMEOUT : HCCL_E_SYSCALL, why, true,
               answer_deadline);
  }
  return "";  // every rank that came has its error
}

void ServeRoot(UniqueFd listener, RootInfo info, std::chrono::seconds timeout,
               std::shared_ptr<Serving> serving, std::shared_ptr<const Served> served) {
  std::string undelivered;
  try {
    undelivered = ServeRootOnce(std::move(listener), *served, timeout);
  } catch (const std::exception &e) {
    LogError("bootstrap: root {}: internal error: {}", served->where, e.what());
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
    if (root.source.ss_family == root.addr.ss_family &&
        bind(fd.get(), reinterpret_cast<const sockaddr *>(&root.source), AddrLen(root.source)) !=
            0) {
      return Error(HCCL_E_TCP_CONNECT, "cannot connect from {}: {}",
                   HostOf(EndpointString(root.source)), ErrnoString(errno));
    }
    if (connect(fd.get(), reinterpret_cast<const sockaddr *>(&root.addr), AddrLen(root.addr)) ==
        0) {
      SetNoDelay(fd.get());
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
  bool retry = false;     // it dropped the connection in a flood of them: connect again
  UniqueId session{};     // the id it chose for the communicator's ranks (with the table)
};

// The table of @nranks ranks in the root's answer @r (code 0), or HCCL_E_TCP_TRANSFER; its
// session id in *@session.
Expected<std::vector<RankIdentity>> ParseTable(const json &r, uint32_t nranks, UniqueId *session) {
  Fields f(r);
  const json *ranks = f.Array("ranks", true);
  if (ranks == nullptr || ranks->size() != nranks) {
    return Error(HCCL_E_TCP_TRANSFER, "malformed rank table: {}",
                 ranks == nullptr ? f.error() : fmt::format("{} ranks", ranks->size()));
  }
  const std::string id = f.Hex("session", sizeof(UniqueId));
  if (!f.ok()) {
    return Error(HCCL_E_TCP_TRANSFER, "malformed rank table: {}", f.error());
  }
  std::memcpy(session->data(), id.data(), session->size());
  std::vector<RankIdentity> peers;
  for (const json &p : *ranks) {
    if (!p.is_object()) {
      return Error(HCCL_E_TCP_TRANSFER, "malformed rank table: a {} for a rank", p.type_name());
    }
    Fields e(p);
    peers.push_back(
        RankIdentity{e.String("host", false), e.U32("pid", false), e.String("address", false)});
    if (!e.ok()) {
      return Error(HCCL_E_TCP_TRANSFER, "malformed rank table: rank {}: {}", peers.size() - 1,
                   e.error());
    }
  }
  return peers;
}

// What the root answered (@r) to this rank's hello: the table of all ranks, or its error.
Expected<std::vector<RankIdentity>> ParseAnswer(const json &r, uint32_t nranks, Outcome *outcome) {
  Fields f(r);
  const auto code = static_cast<HcclResult>(
      f.Int("code", true, HCCL_SUCCESS, HCCL_E_RESERVED - 1, HCCL_E_INTERNAL));
  const bool joined = f.Bool("joined"), foreign = f.Bool("foreign"), retry = f.Bool("retry");
  const std::string error = f.String("error", false, "refused");
  if (!f.ok()) {
    return Error(HCCL_E_TCP_TRANSFER, "malformed answer: {}", f.error());
  }
  outcome->answered = true;
  outcome->joined = code == HCCL_SUCCESS || joined;
  outcome->foreign = foreign;
  outcome->retry = retry;
  if (code != HCCL_SUCCESS) {
    return Error(code, "{}", error);
  }
  return ParseTable(r, nranks, &outcome->session);
}

// Answer the root's challenge @c to this rank's hello @body (with @nonce): check the root's proof,
// send this rank's (*@lost: the connection failed doing so). HCCL_E_TCP_CONNECT when the root
// does not prove it holds the key.
Status AnswerChallenge(int fd, const RootInfo &root, const json &c, const Nonce &nonce,
                       const std::string &body, Clock::time_point deadline, bool *lost) {
  Fields f(c);
  const std::string theirs = f.Hex("nonce", sizeof(Nonce));
  const std::string proof = f.Hex("proof", sizeof(Mac));
  if (!f.ok()) {
    return Error(HCCL_E_TCP_TRANSFER, "malformed challenge: {}", f.error());
  }
  const Mac want = Prove(root.id, kRootProof, {nonce, Bytes(theirs), Bytes(body)});
  if (!SameMac(Bytes(proof), want)) {
    return Error(HCCL_E_TCP_CONNECT,
                 "it does not prove it holds the communicator's key: a stranger holds the root's "
                 "address (or the ranks were given different rootInfo or job secrets)");
  }
  const Mac mine = Prove(root.id, kRankProof, {nonce, Bytes(theirs), Bytes(body)});
  Status st = SendJson(fd, json{{"proof", Hex(mine)}}, deadline);
  *lost = !st.ok() && st.code() != HCCL_E_TIMEOUT;
  return st;
}

// Send this rank's hello, prove the key to the root (which proves it first) and receive the table
// of all ranks.
Expected<std::vector<RankIdentity>> Exchange(const RootInfo &root, uint32_t nranks, uint32_t rank,
                                             const RankIdentity &self, Clock::time_point deadline,
                                             std::chrono::seconds timeout, Outcome *outcome) {
  const std::string where = root.AddressString();
  auto nonce = RandomNonce();
  if (!nonce.ok()) {
    return nonce.status();
  }
  auto fd = Connect(root, deadline, timeout);
  if (!fd.ok()) {
    return fd.status();
  }
  const std::string body = Dump(json{{"hzc", kHelloVersion},
                                     {"tag", PublicId(root.id)},
                                     {"nonce", Hex(*nonce)},
                                     {"nranks", nranks},
                                     {"rank", rank},
                                     {"host", self.host},
                                     {"pid", self.pid},
                                     {"address", self.address}});
  // The root may close the connection before it answered: in a flood of connections it drops
  // the one that waited longest, its hello or proof not in yet (it says so, but a closed socket
  // may lose that). Then @lost: connect again.
  bool lost = false;
  Status st = SendBody(fd->get(), body, deadline);
  lost = !st.ok() && st.code() != HCCL_E_TIMEOUT;
  auto reply = st.ok() ? RecvJson(fd->get(), deadline, &lost) : Expected<json>(st);
  const bool challenged = reply.ok() && reply->contains("proof");
  if (challenged) {
    outcome->answered = true;
    st = AnswerChallenge(fd->get(), root, *reply, *nonce, body, deadline, &lost);
    reply = st.ok() ? RecvJson(fd->get(), deadline, &lost) : Expected<json>(st);
  }
  outcome->retry = outcome->retry || (!reply.ok() && lost);
  if (!reply.ok()) {
    return Error(reply.status().code(), "root {}: {}", where, reply.status().message());
  }
  auto table = ParseAnswer(*reply, nranks, outcome);
  if (table.ok() && !challenged) {
    // A refusal may come before the proofs; the table only after them.
    outcome->joined = false;
    return Error(HCCL_E_TCP_CONNECT,
                 "root {}: it sent the rank table without proving it holds the communicator's "
                 "key: a stranger holds the root's address",
                 where);
  }
  if (!table.ok()) {
    return Error(table.status().code(), "root {}: {}", where, table.status().message());
  }
  return table;
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
                               std::chrono::seconds timeout, Admission admission) {
  auto at = RootAt(address, port, id);
  if (!at.ok()) {
    return at.status();
  }
  auto trust = admission.trust ? Expected<TrustList>(*admission.trust) : ProcessTrustList();
  auto session = RandomId();
  if (!trust.ok() || !session.ok()) {
    return !trust.ok() ? trust.status() : session.status();
  }
  auto served = std::make_shared<Served>(
      Served{id, PublicId(id), std::move(admission), std::move(*trust), *session, ""});
  const sockaddr_storage addr = at->addr;
  RootInfo info = *at;
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    bool in_use = false;
    auto fd = ListenOn(addr, /*reuse=*/port != 0, &info.addr, &in_use);
    if (fd.ok()) {
      served->where = info.AddressString();
      std::thread(ServeRoot, std::move(*fd), info, timeout, AddServing(IdString(info.id)),
                  std::move(served))
          .detach();
      break;
    }
    if (!in_use || Clock::now() >= deadline) {
      return Error(fd.status().code(), "{}{}", fd.status().message(),
                   in_use ? fmt::format(" (still in use after {}s)", timeout.count()) : "");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  LogInfo("bootstrap: root listening on {} for communicator {}", info.AddressString(),
          PublicId(info.id));
  return info;
}

Expected<std::vector<RankIdentity>> Join(const RootInfo &root, uint32_t nranks, uint32_t rank,
                                         const RankIdentity &self, std::chrono::seconds timeout,
                                         bool shared_port, UniqueId *session) {
  const auto deadline = Clock::now() + timeout + std::chrono::seconds(2);
  for (;;) {
    // Looked up before the hello: the thread cannot be done with this rank before it came.
    const std::shared_ptr<Serving> serving = FindServing(IdString(root.id));
    Outcome outcome;
    auto table = Exchange(root, nranks, rank, self, deadline, timeout, &outcome);
    // On a shared port, another communicator's root may have it now (it refuses this rank, or
    // ends with this rank's connection still waiting for it).
    // A root in a flood of connections may have dropped this one (it says so): again.
    if ((outcome.retry || (shared_port && (outcome.foreign || !outcome.answered))) &&
        Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    if (session != nullptr) {
      *session = outcome.session;
    }
    return Answered(root, serving, outcome, std::move(table), deadline);
  }
}

Status CheckHello(std::string_view body) {
  return ParseHello(body).status();
}

Status CheckAnswer(std::string_view body, uint32_t nranks) {
  auto r = ParseObject(body);
  if (!r.ok()) {
    return r.status();
  }
  Outcome outcome;
  return ParseAnswer(*r, nranks, &outcome).status();
}

}  // namespace hzc::bootstrap
