import { deepStrictEqual } from "node:assert/strict";
import { buildInfo, buildInfoJson, VERSION, versionLine } from "./version.ts";
import { exportBuildInfo, Registry } from "./metrics.ts";

Deno.test("version: the line names the release and a short commit", () => {
  deepStrictEqual(
    versionLine({ version: "0.1.0", commit: "cbf7d7b5a0296f83d03c4f84b2bbca662937f4d3" }),
    "holdfast 0.1.0 (git cbf7d7b5a029)",
  );
  deepStrictEqual(
    versionLine({ version: "0.1.0", commit: "unknown" }),
    "holdfast 0.1.0 (git unknown)",
  );
  deepStrictEqual(/^\d+\.\d+\.\d+(-dev)?$/.test(VERSION), true);
  deepStrictEqual(buildInfoJson("abc1234"), '{"commit":"abc1234"}\n');
});

Deno.test("version: without a readable build_info.json the commit is unknown, never a throw", () => {
  // The unit permission set cannot read the repository root: the fallback is taken.
  const info = buildInfo();
  deepStrictEqual(info.version, VERSION);
  deepStrictEqual(info.commit === "unknown" || /^[0-9a-f]{7,40}$/.test(info.commit), true);
});

Deno.test("version: holdfast_build_info is 1, labelled with version and commit", () => {
  const reg = new Registry();
  exportBuildInfo({ version: "0.1.0", commit: "abc1234" }, reg);
  exportBuildInfo({ version: "0.1.0", commit: "abc1234" }, reg); // idempotent
  const text = reg.expose();
  deepStrictEqual(text.includes('holdfast_build_info{version="0.1.0",commit="abc1234"} 1'), true);
  deepStrictEqual(text.split("\n").filter((l) => l.startsWith("holdfast_build_info{")).length, 1);
});
