/**
 * `deno task image`: builds Holdfast's container image (controller, agent and Redis use the same
 * one) from Debian packages and this working tree, with no base-image registry:
 *
 * 1. a Debian bookworm root filesystem, `mmdebstrap --variant=minbase` with the runtime packages
 *    ({@linkcode IMAGE_PACKAGES}), cached in `.cache/image/base-KEY.tar` keyed by suite and
 *    package list, so a second build skips it (about 20 s the first time);
 * 2. the product appended under `/opt/holdfast` (main.ts, lib, controller, node, policy-as host,
 *    build and vectors (the policy host checks a module against them), bpf/build, deno.json,
 *    deno.lock, node_modules without the build-only AssemblyScript) and the pinned deno binary
 *    as `/usr/local/bin/deno`; deno.json there says
 *    `"nodeModulesDir": "manual"` so npm packages resolve from node_modules with no network;
 * 3. `podman import` of that tarball as `--tag` (default `holdfast:dev`, then also tagged
 *    `holdfast:<VERSION>` from lib/version.ts; the image carries `build_info.json` with the
 *    commit), with WORKDIR, ENV and
 *    ENTRYPOINT set (podman is installed with apt-get when missing); `--no-import` stops at the
 *    tarball `.cache/image/holdfast-rootfs.tar`;
 * 4. a check that the image runs: the tarball is unpacked and `deno run main.ts --help` and
 *    `main.ts agent --help` run inside it with `chroot`, offline (a new network namespace), as
 *    root and as uid 65532. (`podman run` cannot run here: crun's setrlimit is refused.)
 *
 * Needs root (mmdebstrap, chroot, unshare). BPF objects and WASM modules are built first when
 * missing (`deno task build`). Prints one JSON line per step and ends with a summary line.
 *
 * @module
 */
import { log as rootLog } from "../lib/log.ts";
import { readCommandLineOrExit, stringOption } from "../lib/args.ts";
import { VERSION } from "../lib/version.ts";
import { writeBuildInfo } from "./_build_info.ts";

/** Debian packages of the image: libbpf and conntrack/mnl for the datapath's FFI, ip, TLS roots,
 * redis-server for the Redis Deployment (k8s/redis.yaml), bird2 for the anycast agents
 * (k8s/anycast.yaml) and LB nodes announcing with BGP. */
export const IMAGE_PACKAGES = [
  "bird2",
  "ca-certificates",
  "iproute2",
  "libbpf1",
  "libmnl0",
  "libnetfilter-conntrack3",
  "redis-server",
] as const;

/** The image name `k8s/` manifests use (`deno task deploy --image` replaces it). */
export const DEFAULT_TAG = "holdfast:dev";

/** The release tag the default build also gets: `holdfast:<VERSION>` (lib/version.ts). */
export const VERSION_TAG = `holdfast:${VERSION}`;

const SUITE = "bookworm";
const ROOT = new URL("../", import.meta.url).pathname;
const CACHE = `${ROOT}.cache/image`;
/** Where the product lives in the image (the manifests' workingDir). */
const APP = "opt/holdfast";
/** What the image carries from the working tree, relative to it. */
const PRODUCT = [
  "main.ts",
  "deno.lock",
  "lib",
  "controller",
  "node",
  "policy-as/host",
  "policy-as/build",
  "policy-as/vectors",
  "bpf/build",
  "node_modules",
];
/** Left out: tests, their data, and the policy compiler (only `deno task build` runs it). */
const EXCLUDE = [
  "*_test.ts",
  "testdata",
  "policy-as/build/fixtures",
  "node_modules/assemblyscript",
  "node_modules/.deno/assemblyscript@*",
  "node_modules/.deno/binaryen@*",
];

const log = rootLog.with({ component: "image" });

/** A command that exited non-zero. */
class CommandFailed extends Error {
  constructor(readonly argv: string[], readonly code: number) {
    super(`Command failed with exit code ${code}: ${JSON.stringify(argv.join(" "))}`);
    this.name = "CommandFailed";
  }
}

/** Runs a command with its output on stderr; throws with its exit code when it fails. */
async function sh(argv: string[], options: { stdout?: "piped" } = {}): Promise<string> {
  const [cmd, ...args] = argv;
  const out = await new Deno.Command(cmd!, {
    args,
    stdin: "null",
    stdout: options.stdout ?? "inherit",
    stderr: "inherit",
  }).output().catch((err) => {
    throw new Error(`Cannot run ${JSON.stringify(argv.join(" "))}: ${err.message}`, { cause: err });
  });
  if (!out.success) {
    throw new CommandFailed(argv, out.code);
  }
  return options.stdout === "piped" ? new TextDecoder().decode(out.stdout).trim() : "";
}

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

/** Installs Debian packages whose command is missing (root only; apt is allowed here). */
async function ensureCommands(pairs: Record<string, string>): Promise<void> {
  const missing: string[] = [];
  for (const [command, pkg] of Object.entries(pairs)) {
    const found = await new Deno.Command("sh", { args: ["-c", `command -v ${command}`] })
      .output();
    if (!found.success) missing.push(pkg);
  }
  if (missing.length === 0) return;
  log.info("installing Debian packages", { packages: missing });
  await sh(["apt-get", "update", "-qq"]);
  await sh(["apt-get", "install", "-y", "-qq", "--no-install-recommends", ...missing]);
}

/** The cached Debian root filesystem for these packages, built with mmdebstrap when missing. */
export async function baseRootfs(): Promise<string> {
  const recipe = JSON.stringify({ suite: SUITE, variant: "minbase", packages: IMAGE_PACKAGES });
  const digest = new Uint8Array(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(recipe)),
  );
  const key = Array.from(digest.slice(0, 8), (b) => b.toString(16).padStart(2, "0")).join("");
  const path = `${CACHE}/base-${key}.tar`;
  if (await exists(path)) {
    log.info("base rootfs cached", { path });
    return path;
  }
  await ensureCommands({ mmdebstrap: "mmdebstrap" });
  const started = performance.now();
  await sh([
    "mmdebstrap",
    "--quiet",
    "--variant=minbase",
    "--format=tar",
    `--include=${IMAGE_PACKAGES.join(",")}`,
    SUITE,
    `${path}.partial`,
  ]);
  await Deno.rename(`${path}.partial`, path);
  log.info("base rootfs built", { path, s: Math.round(performance.now() - started) / 1000 });
  return path;
}

/**
 * Builds `.cache/image/holdfast-rootfs.tar`: the base plus the product; returns its path. GNU tar
 * exits 1 when a file changed while it was read (someone rebuilt or edited it meanwhile); the
 * build then starts over, at most 3 times, so the image never carries a half-written file.
 */
export async function buildRootfs(): Promise<string> {
  for (let attempt = 1;; attempt++) {
    try {
      return await buildRootfsOnce();
    } catch (err) {
      if (
        !(err instanceof CommandFailed && err.argv[0] === "tar" && err.code === 1) || attempt === 3
      ) {
        throw err;
      }
      log.warn("a file changed while it was archived; building again", { attempt });
    }
  }
}

async function buildRootfsOnce(): Promise<string> {
  await Deno.mkdir(CACHE, { recursive: true });
  const base = await baseRootfs();
  const out = `${CACHE}/holdfast-rootfs.tar`;
  await Deno.copyFile(base, out);
  // deno.json as in the repository, but npm packages resolved from node_modules only (offline).
  const stage = await Deno.makeTempDir({ dir: CACHE, prefix: "stage-" });
  try {
    const config = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`));
    config.nodeModulesDir = "manual";
    await Deno.writeTextFile(`${stage}/deno.json`, JSON.stringify(config, null, 2) + "\n");
    // The commit main.ts --version and holdfast_build_info show (lib/version.ts).
    const commit = await writeBuildInfo(`${stage}/build_info.json`);
    log.info("build info", { version: VERSION, commit });
    // Everything readable by any user (the controller and Redis run as uid 65532), owned by root.
    const append = (dir: string, prefix: string, files: string[], extra: string[] = []) =>
      sh([
        "tar",
        "--append",
        "-f",
        out,
        "--owner=0",
        "--group=0",
        "--mode=a+rX,u+w",
        "--sort=name",
        ...extra,
        "-C",
        dir,
        `--transform=s,^,${prefix}/,S`,
        ...files,
      ]);
    await append(ROOT, APP, [...PRODUCT], EXCLUDE.map((e) => `--exclude=${e}`));
    await append(stage, APP, ["deno.json", "build_info.json"]);
    await append(Deno.execPath().replace(/\/deno$/, ""), "usr/local/bin", ["deno"]);
  } finally {
    await Deno.remove(stage, { recursive: true });
  }
  return out;
}

/** The image configuration `podman import --change` sets. */
export const IMAGE_CONFIG = [
  `WORKDIR /${APP}`,
  "ENV DENO_DIR=/tmp/deno-dir",
  "ENV DENO_NO_UPDATE_CHECK=1",
  "ENV PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
  'ENTRYPOINT ["deno"]',
  'CMD ["run", "--no-prompt", "main.ts", "--help"]',
];

/** Imports the tarball into podman's store as `tag`; removes the image the tag pointed at. */
export async function importImage(tarball: string, tag: string): Promise<string> {
  await ensureCommands({ podman: "podman" });
  const previous = await sh(["podman", "image", "ls", "--quiet", "--filter", `reference=${tag}`], {
    stdout: "piped",
  });
  const id = (await sh([
    "podman",
    "import",
    "--quiet",
    ...IMAGE_CONFIG.flatMap((c) => ["--change", c]),
    tarball,
    tag,
  ], { stdout: "piped" })).replace(/^sha256:/, "");
  for (const old of previous.split("\n").filter((p) => p !== "" && !id.startsWith(p))) {
    await sh(["podman", "rmi", "--force", old], { stdout: "piped" }).catch(() => {}); // still used elsewhere: keep
  }
  return id;
}

/**
 * Unpacks the tarball and runs `main.ts --help`, `main.ts agent --help` and `main.ts --version`
 * inside it with chroot,
 * in new mount, PID and network namespaces (offline), as root and as uid 65532. Throws on failure.
 */
export async function checkRootfs(tarball: string): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "hf-image-" });
  try {
    await sh(["tar", "-xf", tarball, "-C", dir]);
    const inside = [
      "set -e",
      `mount -t proc proc ${dir}/proc`,
      `mount -t tmpfs tmpfs ${dir}/tmp`,
      ...["0:0", "65532:65532"].flatMap((user) =>
        ["main.ts --help", "main.ts agent --help", "main.ts --version"].map((args) =>
          `chroot --userspec=${user} ${dir} env -i PATH=/usr/local/bin:/usr/bin:/bin ` +
          `DENO_DIR=/tmp/deno-dir-${user.split(":")[0]} DENO_NO_UPDATE_CHECK=1 sh -c ` +
          `'cd /${APP} && deno run -P=agent --no-prompt --quiet ${args}' | head -1`
        )
      ),
      `chroot ${dir} redis-server --version`,
    ].join("\n");
    const out = await sh(["unshare", "--mount", "--pid", "--net", "--fork", "sh", "-c", inside], {
      stdout: "piped",
    });
    const lines = out.split("\n");
    const want = ["usage: main.ts COMMAND", "usage: main.ts agent", `holdfast ${VERSION} (git `];
    for (let i = 0; i < 2 * want.length; i++) {
      if (!lines[i]?.startsWith(want[i % want.length]!)) {
        throw new Error(`Image check failed: line ${i + 1} is ${JSON.stringify(lines[i])}: ${out}`);
      }
    }
    if (!lines[2 * want.length]?.startsWith("Redis server v=")) {
      throw new Error(`Image has no redis-server: ${out}`);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

/** Builds BPF objects and WASM modules first when they are missing. */
async function ensureBuilt(): Promise<void> {
  const needed = [`${ROOT}bpf/build/lb_xdp.o`, `${ROOT}policy-as/build/release.wasm`];
  for (const path of needed) {
    if (!(await exists(path))) {
      await sh([Deno.execPath(), "task", "-q", "build"]);
      return;
    }
  }
}

if (import.meta.main) {
  const options = readCommandLineOrExit(Deno.args, {
    command: "image",
    usage: `usage: deno task image [--tag NAME:TAG] [--no-import]   (needs root)
  Builds the Holdfast image (Debian bookworm via mmdebstrap + the product), imports it into
  podman as NAME:TAG (default ${DEFAULT_TAG}, also tagged ${VERSION_TAG}) and checks it runs
  main.ts --help and --version.
  --no-import  stop at the tarball .cache/image/holdfast-rootfs.tar (checked all the same)`,
    options: { tag: { type: "string" }, "no-import": { type: "boolean" } },
  }, ({ values }) => ({
    tag: stringOption(values, "tag", { default: DEFAULT_TAG }),
    import: values["no-import"] !== true,
  }));
  const started = performance.now();
  await ensureBuilt();
  const tarball = await buildRootfs();
  const bytes = (await Deno.stat(tarball)).size;
  log.info("rootfs tarball", { path: tarball, mib: Math.round(bytes / 2 ** 20) });
  await checkRootfs(tarball);
  log.info("image checked: main.ts --help runs inside, offline, as root and uid 65532");
  const id = options.import ? await importImage(tarball, options.tag) : null;
  if (id !== null) log.info("imported", { tag: options.tag, id: id.slice(0, 12) });
  // The default build is also the release's tag; an explicit --tag is the caller's own name.
  const versionTag = id !== null && options.tag === DEFAULT_TAG ? VERSION_TAG : null;
  if (id !== null && versionTag !== null) await sh(["podman", "tag", id, versionTag]);
  console.log(JSON.stringify({
    tag: id === null ? null : options.tag,
    versionTag,
    id: id?.slice(0, 12) ?? null,
    tarball,
    mib: Math.round(bytes / 2 ** 20),
    s: Math.round(performance.now() - started) / 1000,
  }));
}
