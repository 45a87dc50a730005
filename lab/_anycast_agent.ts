/**
 * The command line of an anycast lab node's agent (lab/anycast.ts): `main.ts anycast` on the
 * state file or the Kubernetes API, or `main.ts agent` announcing as a stateful LB node.
 *
 * @module
 */

import type { AnycastLabOptions } from "./anycast.ts";
import type { RedirectParts } from "./_anycast_redirect.ts";

/**
 * `main.ts anycast` (state file or Kubernetes) or `main.ts agent` of a lab node; with `redirect`
 * (a redirect lab, lab/_anycast_redirect.ts), `main.ts anycast --redirect` and its flags.
 */
export function agentCommand(
  lab: { readonly dir: string; readonly statePath: string },
  name: string,
  birdDir: string,
  options: AnycastLabOptions,
  redirect?: RedirectParts,
): { args: string[]; permissions: string[] } {
  const plain = plainCommand(lab, name, birdDir, options);
  // Another build runs under its own deno.json (its imports).
  const command = options.release
    ? { ...plain, permissions: ["--config", options.release.config, ...plain.permissions] }
    : plain;
  if (!redirect) return command;
  const perms = command.permissions.filter((p) => p !== "--allow-net=127.0.0.1");
  return {
    args: [...command.args, ...redirect.agentArgs(name)],
    permissions: [...perms, ...redirect.permissions],
  };
}

function plainCommand(
  lab: { readonly dir: string; readonly statePath: string },
  name: string,
  birdDir: string,
  options: AnycastLabOptions,
): { args: string[]; permissions: string[] } {
  const bgp = `${lab.dir}/${name}.bgp.json`;
  const permissions = [
    "--allow-read",
    `--allow-write=${lab.dir}`,
    "--allow-run=ip,bird,birdc",
    "--allow-ffi", // node/bgp reads /proc/PID of a bird a killed agent left (adopts it)
    "--allow-env",
    "--allow-net=127.0.0.1",
    `--allow-net=unix:${birdDir}/bird.ctl`, // node/bgp/_waker.ts keeps bird awake through it
  ];
  if (options.stateful) {
    return {
      args: [
        "agent",
        "--node-name",
        name,
        "--config",
        options.stateful.servicesFile,
        "--datapath",
        "memory",
        "--no-flow-sync",
        "--health",
        "off",
        "--bgp-config",
        bgp,
        "--bgp-dir",
        birdDir,
      ],
      permissions: [...permissions, "--allow-sys", "--allow-ffi"],
    };
  }
  const source = options.kube
    ? ["--kube", "--kubeconfig", options.kube.kubeconfig]
    : ["--state", lab.statePath];
  return {
    args: [
      "anycast",
      "--node",
      name,
      ...source,
      ...(options.kube?.bgpFromConfig ? [] : ["--bgp-config", bgp]),
      "--bird-dir",
      birdDir,
      "--withdraw-wait-ms",
      "300",
    ],
    permissions: options.kube ? [...permissions, "--allow-sys"] : permissions,
  };
}
