/**
 * `deno task image` builds the image and imports it into podman; the imported image, mounted
 * (`podman image mount`) and entered with chroot in new mount/PID/network namespaces, runs its
 * own entrypoint and command (`deno run --no-prompt main.ts --help`) from its WORKDIR with its
 * ENV, offline, as uid 65532, `main.ts agent --help` (which loads the npm packages), and the agent
 * itself (in-memory maps) until it is ready, so every file it loads at run time is in the image.
 * Needs root; about 10 s with the Debian root filesystem cached in .cache/image, 30 s without.
 * Imports as holdfast:test and removes it afterwards, so an operator's holdfast:dev is untouched.
 */
import { VERSION } from "../../lib/version.ts";
import { deepStrictEqual as assertEquals, ok as assert } from "node:assert/strict";
import { rootTest } from "../harness/mod.ts";

const ROOT = new URL("../../", import.meta.url).pathname;
const TAG = "holdfast:test";

/** A services file for the agent run inside the image (one frontend, one backend). */
const SERVICES = `services:
  - name: default/web
    frontends: [{ address: "10.0.100.1:80/TCP", portName: http }]
    backends: [{ address: "10.0.1.1:8080/TCP", portName: http }]`;
const AGENT = "deno run -P=agent --no-prompt --quiet main.ts agent --node-name img " +
  "--config /tmp/services.yaml --datapath memory --no-flow-sync --listen none";

async function run(
  cmd: string,
  args: string[],
  env?: Record<string, string>,
): Promise<{ code: number; out: string }> {
  const r = await new Deno.Command(cmd, { args, cwd: ROOT, env, stdout: "piped", stderr: "piped" })
    .output();
  const text = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: r.code, out: text(r.stdout) + text(r.stderr) };
}

rootTest(
  "deno task image: the imported image runs main.ts --help offline as uid 65532",
  async () => {
    try {
      const build = await run(Deno.execPath(), ["task", "-q", "image", "--tag", TAG]);
      assertEquals(build.code, 0, build.out);
      const lines = build.out.trim().split("\n").filter((l) => l.startsWith("{"));
      const summary = JSON.parse(lines.at(-1)!);
      assertEquals(summary.tag, TAG);
      assert(summary.mib > 100 && summary.mib < 600, `image size ${summary.mib} MiB`);

      const inspect = await run("podman", [
        "image",
        "inspect",
        TAG,
        "--format",
        "{{json .Config}}",
      ]);
      assertEquals(inspect.code, 0, inspect.out);
      const config = JSON.parse(inspect.out) as {
        Entrypoint: string[];
        Cmd: string[];
        WorkingDir: string;
        Env: string[];
      };
      assertEquals(config.WorkingDir, "/opt/holdfast");
      const argv = [...config.Entrypoint, ...config.Cmd];
      assertEquals(argv, ["deno", "run", "--no-prompt", "main.ts", "--help"]);

      const mount = await run("podman", ["image", "mount", TAG]);
      assertEquals(mount.code, 0, mount.out);
      const dir = mount.out.trim();
      try {
        const env = config.Env.map((e) => `'${e}'`).join(" ");
        const inChroot = (args: string) =>
          `chroot --userspec=65532:65532 ${dir} env -i ${env} sh -c 'cd ${config.WorkingDir} && ${args}'`;
        const script = [
          "set -e",
          `mount -t proc proc ${dir}/proc`,
          `mount -t tmpfs tmpfs ${dir}/tmp`,
          inChroot(argv.join(" ")),
          inChroot("deno run -P=agent --no-prompt --quiet main.ts agent --help"),
          inChroot("deno run -P=agent --no-prompt --quiet main.ts --version"),
          `chroot ${dir} redis-server --version`,
          // The agent for real (in-memory maps, no Redis): every runtime file it loads is there.
          `printf '%s\\n' "$SERVICES" > ${dir}/tmp/services.yaml`,
          `${inChroot(AGENT)} > ${dir}/tmp/agent.log 2>&1 &`,
          `for i in $(seq 150); do grep -q '"msg":"ready"' ${dir}/tmp/agent.log && break; sleep 0.1; done`,
          `kill $!; cat ${dir}/tmp/agent.log`,
        ].join("\n");
        const inside = await run("unshare", [
          "--mount",
          "--pid",
          "--net",
          "--fork",
          "sh",
          "-c",
          script,
        ], { SERVICES });
        assertEquals(inside.code, 0, inside.out);
        assert(inside.out.includes("usage: main.ts COMMAND"), inside.out);
        assert(inside.out.includes("usage: main.ts agent --node-name NAME"), inside.out);
        assert(inside.out.includes("Redis server v=7"), inside.out);
        // The release and the commit the image was built from (build_info.json in the image).
        assert(
          new RegExp(`holdfast ${VERSION.replaceAll(".", "\\.")} \\(git [0-9a-f]{12}\\)`).test(
            inside.out,
          ),
          inside.out,
        );
        assert(
          inside.out.includes('"msg":"ready"'),
          `the agent is ready in the image: ${inside.out}`,
        );
      } finally {
        await run("podman", ["image", "unmount", TAG]);
      }
    } finally {
      await run("podman", ["rmi", "--force", TAG]);
    }
  },
);
