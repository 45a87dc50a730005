import { allExportsTrapping, handMadeWasm, readBuiltWasm } from "./_testing.ts";
import { ABI_VERSION } from "./abi.ts";
import { MaglevInputError } from "./maglev_input.ts";
import { PolicyModule, PolicyRejectedError, type RejectReason } from "./policy_module.ts";

async function expectRejected(
  bytes: Uint8Array,
  reason: RejectReason,
  fragment: string,
  limits = {},
): Promise<void> {
  try {
    await PolicyModule.load(bytes, limits);
  } catch (e) {
    if (!(e instanceof PolicyRejectedError)) throw e;
    if (e.reason !== reason || !e.message.includes(fragment)) {
      throw new Error(`expected ${reason} with "${fragment}", got ${e.reason}: ${e.message}`);
    }
    return;
  }
  throw new Error(`module was accepted; expected rejection "${reason}"`);
}

Deno.test("release and debug builds load, have no imports and speak the host's ABI", async () => {
  for (const target of ["release", "debug"]) {
    const bytes = await readBuiltWasm(target);
    const mod = new WebAssembly.Module(bytes as BufferSource);
    if (WebAssembly.Module.imports(mod).length !== 0) throw new Error(`${target} has imports`);
    const policy = await PolicyModule.load(bytes);
    if (policy.memoryPages > 128) throw new Error(`${target}: ${policy.memoryPages} pages`);
  }
});

Deno.test("release build stays small (accidental growth check)", async () => {
  const size = (await readBuiltWasm("release")).length;
  if (size > 8192) throw new Error(`release.wasm is ${size} bytes, expected under 8 KiB`);
});

Deno.test("non-WASM bytes are rejected as a compile failure", async () => {
  await expectRejected(new TextEncoder().encode("not wasm"), "compile", "not valid WebAssembly");
});

Deno.test("a module with an import is rejected, naming the import", async () => {
  const bytes = handMadeWasm({ functions: allExportsTrapping(), memoryPages: 1, withImport: true });
  await expectRejected(bytes, "imports", `"env.abort"`);
});

Deno.test("a module missing an export is rejected, naming it", async () => {
  const fns = allExportsTrapping();
  delete fns.maglev_build;
  await expectRejected(
    handMadeWasm({ functions: fns, memoryPages: 1 }),
    "exports",
    `"maglev_build"`,
  );
  await expectRejected(handMadeWasm({ functions: allExportsTrapping() }), "exports", `"memory"`);
});

Deno.test("a module with another ABI version is rejected with both versions", async () => {
  const bytes = handMadeWasm({ functions: allExportsTrapping(ABI_VERSION + 1), memoryPages: 1 });
  await expectRejected(
    bytes,
    "abi",
    `ABI version ${ABI_VERSION + 1}, this host speaks ${ABI_VERSION}`,
  );
});

Deno.test("a module whose abi_version traps is rejected as a trap", async () => {
  const fns = { ...allExportsTrapping(), abi_version: "trap" as const };
  await expectRejected(handMadeWasm({ functions: fns, memoryPages: 1 }), "trap", "abi_version()");
});

Deno.test("a module over the memory cap is rejected", async () => {
  const bytes = handMadeWasm({ functions: allExportsTrapping(), memoryPages: 200 });
  await expectRejected(bytes, "memory", "200 pages > 128");
  await expectRejected(await readBuiltWasm("release"), "memory", "pages > 0", {
    maxMemoryPages: 0,
  });
});

Deno.test("module errors for bad Maglev input surface as MaglevInputError", async () => {
  const policy = await PolicyModule.load(await readBuiltWasm("release"));
  for (const [m, fragment] of [[250, "outside 251..131071"], [255, "not prime"]] as const) {
    try {
      policy.buildMaglev(new Uint32Array(0), m);
      throw new Error(`M=${m} accepted`);
    } catch (e) {
      if (!(e instanceof MaglevInputError) || !e.message.includes(fragment)) throw e;
    }
  }
});

Deno.test("tables returned are copies: a later build does not change an earlier table", async () => {
  const policy = await PolicyModule.load(await readBuiltWasm("release"));
  const a = policy.buildMaglev(new Uint32Array([1, 2, 1, 3, 4, 1]), 251).table;
  const before = a.slice();
  policy.buildMaglev(new Uint32Array([5, 6, 1]), 251);
  if (!a.every((v, i) => v === before[i])) throw new Error("earlier table changed");
});
