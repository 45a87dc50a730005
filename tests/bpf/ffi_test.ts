/**
 * The FFI layer's errors and handles: libbpf's errno text in messages, size checks before the
 * kernel is asked, pinned program/map handles that close their fds, libbpf path override.
 */

import { strictEqual, throws } from "node:assert/strict";
import { rootTest } from "../harness/root.ts";
import { rmdirPath, unlinkPath } from "../../node/bpf/_ffi.ts";
import {
  BpfError,
  BpfMap,
  BpfObject,
  BpfProgram,
  DEFAULT_OBJECT_DIR,
  ensureBpffs,
  libbpfPath,
  MAP_TYPE,
  testRun,
  XDP,
} from "../../node/bpf/mod.ts";

rootTest("errors carry what failed, the quoted subject and libbpf's errno text", () => {
  try {
    BpfObject.open("/nonexistent/x.o");
    throw new Error("opening a missing object must fail");
  } catch (err) {
    strictEqual(err instanceof BpfError, true);
    strictEqual((err as BpfError).errno, 2);
    strictEqual(
      (err as Error).message,
      'Cannot open BPF object "/nonexistent/x.o": No such file or directory (errno 2)',
    );
  }
  using obj = BpfObject.open(`${DEFAULT_OBJECT_DIR}/lb_xdp.o`);
  throws(
    () => obj.program("nope"),
    /Cannot find program "nope" in BPF object .* \(has: hf_lb\)/,
  );
  throws(
    () => obj.map("hf_services").lookup(new Uint8Array(3)),
    /3-byte key on map "hf_services": key size is 8/,
  );
  throws(
    () => BpfMap.fromPinned("/sys/fs/bpf/hf-nonexistent"),
    /Cannot open pinned map "\/sys\/fs\/bpf\/hf-nonexistent": No such file or directory/,
  );
  throws(
    () =>
      BpfMap.create(MAP_TYPE.ARRAY, { name: "hf_bad", keySize: 3, valueSize: 4, maxEntries: 1 }),
    /Cannot create map "hf_bad" .*: Invalid argument \(errno 22\)/,
  );
  strictEqual(libbpfPath(), Deno.env.get("HOLDFAST_LIBBPF") || "libbpf.so.1");
});

rootTest("a pinned program and map are reopened by path and closed by dispose", async () => {
  const dir = `/sys/fs/bpf/hf-test-ffi-${Deno.pid}`;
  await ensureBpffs(dir);
  try {
    {
      using obj = BpfObject.open(`${DEFAULT_OBJECT_DIR}/xdp_pass.o`);
      obj.program("hf_xdp_pass").pin(`${dir}/prog`);
      using m = BpfMap.create(MAP_TYPE.HASH, {
        name: "hf_t",
        keySize: 4,
        valueSize: 4,
        maxEntries: 8,
      });
      m.update(new Uint8Array([1, 0, 0, 0]), new Uint8Array([7, 0, 0, 0]));
      m.pin(`${dir}/map`);
    }
    using prog = BpfProgram.fromPinned(`${dir}/prog`);
    strictEqual(testRun(prog, new Uint8Array(64)).retval, XDP.PASS);
    using m = BpfMap.fromPinned(`${dir}/map`);
    strictEqual(m.lookup(new Uint8Array([1, 0, 0, 0]))?.[0], 7);
    strictEqual(m.delete(new Uint8Array([1, 0, 0, 0])), true);
    strictEqual(m.delete(new Uint8Array([1, 0, 0, 0])), false, "second delete: absent");
    m[Symbol.dispose]();
    throws(() => m.fd, /it is closed/);
  } finally {
    unlinkPath(`${dir}/prog`);
    unlinkPath(`${dir}/map`);
    rmdirPath(dir);
  }
});
