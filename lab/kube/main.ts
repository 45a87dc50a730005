/**
 * `deno task kube:server [--port N] [--crds DIR]...`: runs the Kubernetes API test server until
 * interrupted, printing one JSON line with its URL and a kubeconfig path
 * (`kubectl --kubeconfig PATH get nodes`).
 *
 * @module
 */
import { intOption, listOption, readCommandLineOrExit, stringOption } from "../../lib/args.ts";
import { startKubeServer } from "./server.ts";

const USAGE =
  `usage: deno task kube:server [--port N] [--crds DIR_OR_FILE]... [--kubeconfig PATH] [--log-requests]
  [--simulate-rollouts]
  Serves a Kubernetes API for tests and tools on 127.0.0.1 (see docs/kube_test_server.md).
  --port N            port on 127.0.0.1 (default 0: a free one)
  --crds PATH         load the CustomResourceDefinitions in this file or directory (repeatable)
  --kubeconfig PATH   write the kubeconfig here (default: a temp file removed at exit)
  --log-requests      log each request as a JSON line
  --simulate-rollouts give Deployments and DaemonSets a finished rollout's status`;

const options = readCommandLineOrExit(Deno.args, {
  command: "kube:server",
  usage: USAGE,
  options: {
    port: { type: "string" },
    crds: { type: "string", multiple: true },
    kubeconfig: { type: "string" },
    "log-requests": { type: "boolean" },
    "simulate-rollouts": { type: "boolean" },
  },
}, (line) => ({
  port: intOption(line.values, "port", { min: 0, max: 65535, default: 0 }),
  crds: listOption(line.values, "crds"),
  kubeconfig: stringOption(line.values, "kubeconfig"),
  logRequests: line.values["log-requests"] === true,
  simulateRollouts: line.values["simulate-rollouts"] === true,
}));

const server = await startKubeServer({
  port: options.port,
  crdDirs: options.crds,
  logRequests: options.logRequests,
  simulateRollouts: options.simulateRollouts,
});
const kubeconfig = await server.writeKubeconfig(options.kubeconfig);
console.log(JSON.stringify({ msg: "kube test server listening", url: server.url, kubeconfig }));
const stop = Promise.withResolvers<void>();
Deno.addSignalListener("SIGINT", () => stop.resolve());
Deno.addSignalListener("SIGTERM", () => stop.resolve());
await stop.promise;
await server.close();
