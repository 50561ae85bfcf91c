// SPDX-License-Identifier: Apache-2.0
#include "core/comm_options.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string_view>

#include "base/config.h"

namespace hzc {

namespace {

// The header HcclCommConfigInit writes into HcclCommConfig::reserved.
struct Header {
  size_t size;
  uint32_t magic;
  uint32_t version;
  uint64_t reserved;
};
static_assert(sizeof(Header) == HCCL_COMM_CONFIG_INFO_BYTES);

// Reads the fields of a caller's HcclCommConfig that its recorded size covers.
class Fields {
 public:
  Fields(const HcclCommConfig &c, size_t size) : c_(c), size_(size) {}

  // Whether the caller's structure has the field at @offset of @len bytes.
  bool Has(size_t offset, size_t len) const { return offset + len <= size_; }

  // A NUL-terminated string field of @cap bytes at @offset, or HCCL_E_PARA.
  Status String(const char *field, const char *data, size_t cap, std::string *out) const {
    const size_t offset = static_cast<size_t>(data - reinterpret_cast<const char *>(&c_));
    if (!Has(offset, cap)) {
      return Status::Ok();
    }
    const void *nul = std::memchr(data, '\0', cap);
    if (nul == nullptr) {
      return Error(HCCL_E_PARA, "config->{}: no NUL within its {} bytes", field, cap);
    }
    *out = std::string(data, static_cast<const char *>(nul));
    return Status::Ok();
  }

 private:
  const HcclCommConfig &c_;
  const size_t size_;
};

#define HZC_HAS(f, field) (f).Has(offsetof(HcclCommConfig, field), sizeof(HcclCommConfig::field))

Status CheckHeader(const HcclCommConfig &c, Header *h) {
  std::memcpy(h, c.reserved, sizeof(*h));
  if (h->magic != HCCL_COMM_CONFIG_MAGIC_WORD) {
    return Error(HCCL_E_PARA,
                 "config: magic word {:#x} is not {:#x}; fill it with "
                 "HcclCommConfigInit first",
                 h->magic, HCCL_COMM_CONFIG_MAGIC_WORD);
  }
  if (h->version == 0 || h->size < offsetof(HcclCommConfig, hcclCommName)) {
    return Error(HCCL_E_PARA, "config: header size {} / version {} are not HcclCommConfigInit's",
                 h->size, h->version);
  }
  return Status::Ok();
}

// The RDMA fields: validated as HCCL does (they have no effect on hzc's links yet).
Status CheckRdma(const Fields &f, const HcclCommConfig &c) {
  if (HZC_HAS(f, hcclRdmaTrafficClass) &&
      c.hcclRdmaTrafficClass != HCCL_COMM_TRAFFIC_CLASS_CONFIG_NOT_SET &&
      (c.hcclRdmaTrafficClass > 255 || c.hcclRdmaTrafficClass % 4 != 0)) {
    return Error(HCCL_E_PARA, "config->hcclRdmaTrafficClass={}: not a multiple of 4 in [0, 255]",
                 c.hcclRdmaTrafficClass);
  }
  if (HZC_HAS(f, hcclRdmaServiceLevel) &&
      c.hcclRdmaServiceLevel != HCCL_COMM_SERVICE_LEVEL_CONFIG_NOT_SET &&
      c.hcclRdmaServiceLevel > 7) {
    return Error(HCCL_E_PARA, "config->hcclRdmaServiceLevel={}: not in [0, 7]",
                 c.hcclRdmaServiceLevel);
  }
  if (HZC_HAS(f, hcclQos) && c.hcclQos != HCCL_COMM_QOS_CONFIG_NOT_SET && c.hcclQos > 7) {
    return Error(HCCL_E_PARA, "config->hcclQos={}: not in [0, 7]", c.hcclQos);
  }
  return Status::Ok();
}

// hcclSymWinMaxMemSizePerRank, in GB.
Status ReadSymWin(const Fields &f, const HcclCommConfig &c, CommOptions *o) {
  constexpr uint64_t kMaxGb = uint64_t{1} << 20;
  if (!HZC_HAS(f, hcclSymWinMaxMemSizePerRank)) {
    return Status::Ok();
  }
  if (c.hcclSymWinMaxMemSizePerRank == 0 || c.hcclSymWinMaxMemSizePerRank > kMaxGb) {
    return Error(HCCL_E_PARA, "config->hcclSymWinMaxMemSizePerRank={}: not in [1, {}] (GB)",
                 c.hcclSymWinMaxMemSizePerRank, kMaxGb);
  }
  o->sym_win_bytes = c.hcclSymWinMaxMemSizePerRank << 30;
  return Status::Ok();
}

Status ReadNumbers(const Fields &f, const HcclCommConfig &c, CommOptions *o) {
  if (c.hcclBufferSize != HCCL_COMM_BUFFSIZE_CONFIG_NOT_SET) {
    if (c.hcclBufferSize == 0) {
      return Error(HCCL_E_PARA, "config->hcclBufferSize=0: must be at least 1 (MB)");
    }
    o->buffer_mb = c.hcclBufferSize;
  }
  if (c.hcclDeterministic != HCCL_COMM_DETERMINISTIC_CONFIG_NOT_SET) {
    if (c.hcclDeterministic > 2) {
      return Error(HCCL_E_PARA, "config->hcclDeterministic={}: not 0, 1 or 2", c.hcclDeterministic);
    }
    o->deterministic = c.hcclDeterministic;
  }
  if (HZC_HAS(f, aclGraphZeroCopyEnable) && c.aclGraphZeroCopyEnable > 1) {
    return Error(HCCL_E_PARA, "config->aclGraphZeroCopyEnable={}: not 0 or 1",
                 c.aclGraphZeroCopyEnable);
  }
  if (HZC_HAS(f, hcclExecTimeOut) && c.hcclExecTimeOut != HCCL_COMM_EXECTIMEOUT_CONFIG_NOT_SET) {
    if (c.hcclExecTimeOut < 1 ||
        static_cast<uint64_t>(c.hcclExecTimeOut) > Config::kMaxExecTimeoutS) {
      return Error(HCCL_E_PARA, "config->hcclExecTimeOut={}: not a number of seconds in [1, {}]",
                   c.hcclExecTimeOut, Config::kMaxExecTimeoutS);
    }
    o->exec_timeout = std::chrono::seconds(c.hcclExecTimeOut);
  }
  HZC_RETURN_IF_ERROR(ReadSymWin(f, c, o));
  return CheckRdma(f, c);
}

}  // namespace

Expected<CommOptions> CommOptions::FromConfig(const HcclCommConfig *config) {
  CommOptions o;
  if (config == nullptr) {
    return o;
  }
  Header h{};
  HZC_RETURN_IF_ERROR(CheckHeader(*config, &h));
  const Fields f(*config, std::min(h.size, sizeof(HcclCommConfig)));
  HZC_RETURN_IF_ERROR(ReadNumbers(f, *config, &o));
  HZC_RETURN_IF_ERROR(
      f.String("hcclCommName", config->hcclCommName, COMM_NAME_MAX_LENGTH, &o.name));
  HZC_RETURN_IF_ERROR(f.String("hcclUdi", config->hcclUdi, UDI_MAX_LENGTH, &o.udi));
  return o;
}

}  // namespace hzc
