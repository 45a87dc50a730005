/**
 * Every program the project spawns is installed by `scripts/setup.sh` (a probe of
 * `scripts/packages.txt`) or comes with the base machine image (`scripts/base-packages.txt`), so
 * CI passes on a fresh machine and not only on one where somebody installed a tool by hand. The
 * list of programs is derived from the sources (`_spawned.ts`), and a fixture tree shows the
 * derivation and the check find what they must.
 */
import { deepStrictEqual, ok } from "node:assert/strict";
import {
  dpkgOwners,
  onPath,
  packageSet,
  type Provision,
  setupProbes,
  spawnedPrograms,
  unprovided,
} from "./_spawned.ts";

const ROOT = new URL("../..", import.meta.url).pathname.replace(/\/$/, "");
const FIXTURE = `${ROOT}/tests/hygiene/testdata/spawn`;
const read = (path: string) => Deno.readTextFileSync(`${ROOT}/${path}`);

const probes = setupProbes(read("scripts/packages.txt"));
const base = packageSet(read("scripts/base-packages.txt"));
const ownerOf = dpkgOwners();
/** setup.sh also installs deno itself (npm package, into .cache/) and puts it on PATH. */
const provision = (without: string[] = []): Provision => ({
  setup: new Set([...probes.keys(), "deno"].filter((p) => !without.includes(p))),
  base,
  ownerOf,
});

function explain(missing: ReturnType<typeof unprovided>): string {
  return missing.map((m) =>
    `"${m.program}" (${m.owner ? `Debian package "${m.owner}"` : "not installed here"}), ` +
    `spawned by ${m.where.join("; ")}`
  ).join("\n");
}

Deno.test("hygiene: every spawned program is installed by setup or comes with the base image", () => {
  const spawned = spawnedPrograms(ROOT);
  // Not vacuous: the derivation sees the programs of each kind of source.
  for (const p of ["podman", "mmdebstrap", "bird", "clang", "kubectl", "nft", "ss", "sed"]) {
    ok(spawned.has(p), `the derivation misses "${p}": ${[...spawned.keys()].join(" ")}`);
  }
  const missing = unprovided(spawned, provision());
  ok(
    missing.length === 0,
    "spawned but neither installed by scripts/setup.sh (scripts/packages.txt) nor in the base " +
      `image (scripts/base-packages.txt):\n${explain(missing)}`,
  );
});

Deno.test("hygiene: each probe of scripts/packages.txt is present after setup ran", () => {
  const absent = [...probes].filter(([probe]) =>
    probe.startsWith("/") ? !existsSync(probe) : onPath(probe) === undefined
  );
  deepStrictEqual(
    absent,
    [],
    `these probes are missing although setup ran; does the package provide them? ${absent}`,
  );
});

Deno.test("hygiene: a program dropped from setup's list is named, with where it is spawned", () => {
  const missing = unprovided(spawnedPrograms(ROOT), provision(["podman", "mmdebstrap"]));
  deepStrictEqual(missing.map((m) => m.program), ["mmdebstrap", "podman"]);
  ok(missing[1]!.where.includes("deno.json: -P=image run list"), explain(missing));
});

Deno.test("hygiene: the fixture tree's spawns are all found, and nothing provides them", () => {
  const spawned = spawnedPrograms(FIXTURE, "permissions.json");
  deepStrictEqual([...spawned.keys()].sort(), [
    "blargh",
    "blorb-helper",
    "deno",
    "frobnicate-net",
    "ip",
    "podman",
    "qux-tool",
    "tar",
    "zorkctl",
  ]);
  const fixtureProbes = setupProbes(Deno.readTextFileSync(`${FIXTURE}/scripts/packages.txt`));
  const missing = unprovided(spawned, {
    setup: new Set([...fixtureProbes.keys(), "deno"]),
    base,
    ownerOf,
  });
  // podman is a real Debian package, but not the base image's and not in this setup list.
  deepStrictEqual(missing.map((m) => m.program), [
    "blargh",
    "blorb-helper",
    "frobnicate-net",
    "podman",
    "qux-tool",
    "zorkctl",
  ]);
  ok(explain(missing).includes('"qux-tool" (not installed here), spawned by lab/fixture.ts'));
});

function existsSync(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}
