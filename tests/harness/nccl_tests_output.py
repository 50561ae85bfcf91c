#!/usr/bin/env python3
"""Read the output of an nccl-tests benchmark (all_reduce_perf and its siblings) or of hzc-perf.

Written to nccl-tests' format, not to hzc-perf's code, as the scripts that read nccl-tests are:

  - lines that start with '#' are the preamble, the column headers and the footer;
  - the preamble's first line is "# nThread T nGpus G minBytes B maxBytes E step: S(factor|bytes)
    warmup iters: W iters: N agg iters: M validation: C graph: 0", and "# Using devices" is
    followed by one "#  Rank  r Group  g Pid  p on host device  d [0xbb] name" line per rank;
  - the column names are "size count type redop root" and, for the out-of-place then the
    in-place measurement, "time algbw busbw #wrong" ("cputime" instead of "time" with -C 1);
  - a data row has these 13 whitespace-separated columns: size and count integers, type one of
    nccl-tests' names, redop a reduction or "none", root an integer (-1 when the collective has
    none), time/algbw/busbw numbers and #wrong an integer (or N/A when results are not checked);
  - the footer has "# Out of bounds values : N OK|FAILED" and "# Avg bus bandwidth    : X".

Usage: nccl_tests_output.py FILE [--ranks N] [--coll NAME] [--check]
Prints one summary line; exit status 0 if FILE is well formed (and, with --check, every
#wrong is 0 and busbw = algbw x the collective's factor), 1 otherwise.
"""

import argparse
import re
import sys

TYPES = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double",
         "bfloat16", "int16", "uint16"}
OPS = {"sum", "prod", "max", "min", "avg", "mulsum", "none"}
PREAMBLE = re.compile(
    r"^# nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+) step: (\d+)\((factor|bytes)\) "
    r"warmup iters: (\d+) iters: (\d+) agg iters: (\d+) validation: (\d+) graph: (\d+)\s*$")
DEVICE = re.compile(r"^#\s+Rank\s+(\d+) Group\s+(\d+) Pid\s+(\d+) on\s+(\S+) device\s+(\d+) "
                    r"\[0x[0-9a-f]+\] (.*)$")
COLUMNS = ["size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
           "algbw", "busbw", "#wrong"]
AVG = re.compile(r"^# Avg bus bandwidth\s+: (\S+)")
OOB = re.compile(r"^# Out of bounds values : (\d+) (OK|FAILED)")
FACTORS = {"all_reduce": lambda n: 2.0 * (n - 1) / n,
           "all_gather": lambda n: (n - 1) / n,
           "reduce_scatter": lambda n: (n - 1) / n,
           "broadcast": lambda n: 1.0}


class FormatError(Exception):
    pass


def parse(text):
    """A dict: preamble fields, devices, rows (dicts), avg_busbw, out_of_bounds."""
    out = {"devices": [], "rows": [], "avg_busbw": None, "out_of_bounds": None,
           "preamble": None, "columns": None}
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("#"):
            if m := PREAMBLE.match(line):
                out["preamble"] = {"nthread": int(m[1]), "ngpus": int(m[2]),
                                   "minbytes": int(m[3]), "maxbytes": int(m[4]),
                                   "step": int(m[5]), "step_kind": m[6], "warmup": int(m[7]),
                                   "iters": int(m[8]), "agg": int(m[9]),
                                   "validation": int(m[10])}
            elif m := DEVICE.match(line):
                out["devices"].append({"rank": int(m[1]), "pid": int(m[3]), "host": m[4],
                                       "name": m[6]})
            elif m := AVG.match(line):
                out["avg_busbw"] = float(m[1])
            elif m := OOB.match(line):
                out["out_of_bounds"] = (int(m[1]), m[2])
            elif line[1:].split()[:1] == ["size"]:
                names = ["time" if w == "cputime" else w for w in line[1:].split()]
                if names != COLUMNS:
                    raise FormatError(f"line {number}: column names {line[1:].split()}")
                out["columns"] = names
            continue
        fields = line.split()
        if not fields:
            continue
        if out["columns"] is None:
            raise FormatError(f"line {number}: a data row before the column names")
        if len(fields) != 13:
            raise FormatError(f"line {number}: {len(fields)} columns, want 13: {line!r}")
        try:
            row = {"size": int(fields[0]), "count": int(fields[1]), "type": fields[2],
                   "redop": fields[3], "root": int(fields[4])}
            for prefix, at in (("oop", 5), ("ip", 9)):
                row[prefix + "_time"] = float(fields[at])
                row[prefix + "_algbw"] = float(fields[at + 1])
                row[prefix + "_busbw"] = float(fields[at + 2])
                wrong = fields[at + 3]
                row[prefix + "_wrong"] = None if wrong == "N/A" else int(wrong)
        except ValueError as e:
            raise FormatError(f"line {number}: {e}: {line!r}") from None
        if row["type"] not in TYPES:
            raise FormatError(f"line {number}: type {row['type']!r} is not an nccl-tests type")
        if row["redop"] not in OPS:
            raise FormatError(f"line {number}: redop {row['redop']!r}")
        out["rows"].append(row)
    if out["preamble"] is None:
        raise FormatError("no '# nThread ...' preamble")
    if out["columns"] is None:
        raise FormatError("no column names")
    if out["avg_busbw"] is None:
        raise FormatError("no '# Avg bus bandwidth' footer")
    if out["out_of_bounds"] is None:
        raise FormatError("no '# Out of bounds values' footer")
    return out


def check(result, ranks=None, coll=None):
    """Consistency of a run of hzc-perf COLL with RANKS ranks and checked results."""
    p = result["preamble"]
    n = p["nthread"] * p["ngpus"]
    if ranks is not None and n != ranks:
        raise FormatError(f"nThread x nGpus = {n}, want {ranks}")
    if len(result["devices"]) != n:
        raise FormatError(f"{len(result['devices'])} device lines for {n} ranks")
    if not result["rows"]:
        raise FormatError("no data rows")
    total, count = 0.0, 0
    for row in result["rows"]:
        # AllGather and ReduceScatter round the size down to a multiple of ranks x element size.
        if not p["minbytes"] - 8 * n < row["size"] <= p["maxbytes"]:
            raise FormatError(f"size {row['size']} outside [minBytes, maxBytes]")
        for prefix in ("oop", "ip"):
            if row[prefix + "_wrong"] != 0:
                raise FormatError(f"size {row['size']}: #wrong {row[prefix + '_wrong']}")
            if coll is not None:
                want = row[prefix + "_algbw"] * FACTORS[coll](n)
                if abs(row[prefix + "_busbw"] - want) > 0.016 + 0.01 * want:
                    raise FormatError(f"size {row['size']}: busbw {row[prefix + '_busbw']}, "
                                      f"want algbw x factor = {want:.3f}")
            total += row[prefix + "_busbw"]
            count += 1
    # The footer's average is over the unrounded values: allow the rounding of the rows.
    if abs(result["avg_busbw"] - total / count) > 0.006 + 0.01 * result["avg_busbw"]:
        raise FormatError(f"avg bus bandwidth {result['avg_busbw']}, rows average {total / count}")
    if result["out_of_bounds"] != (0, "OK"):
        raise FormatError(f"out of bounds values: {result['out_of_bounds']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--ranks", type=int)
    ap.add_argument("--coll", choices=sorted(FACTORS))
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    try:
        with open(args.file, encoding="utf-8") as f:
            result = parse(f.read())
        if args.check:
            check(result, args.ranks, args.coll)
    except (OSError, FormatError) as e:
        print(f"{args.file}: {e}")
        return 1
    print(f"{args.file}: {len(result['rows'])} rows, {len(result['devices'])} ranks, "
          f"avg busbw {result['avg_busbw']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
