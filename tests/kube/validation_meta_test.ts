/**
 * ObjectMeta validation of the test server, driven with kubectl, for every kind Holdfast uses:
 * names by the kind's rule (DNS-1035 for Services, RFC 1123 label for Namespaces, subdomain for
 * the rest), label keys and values, the 256 KiB annotation limit, and no new finalizer on an
 * object being deleted; each refusal a 422 Invalid worded as the real API server words it.
 */
import { deepStrictEqual } from "node:assert/strict";
import { kubectlEnv } from "./_kubectl.ts";
import { refused, serviceYaml } from "./_refuse.ts";
import { call } from "./_http.ts";

const DNS1035 =
  "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const LABEL =
  "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const SUBDOMAIN =
  "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

/** A valid object of each kind Holdfast uses, named `name`, with `meta` merged in. */
function objects(name: string, meta: Record<string, unknown> = {}): Record<string, string> {
  const md = { name, ...meta };
  const o = (apiVersion: string, kind: string, rest: Record<string, unknown> = {}) =>
    JSON.stringify({ apiVersion, kind, metadata: md, ...rest });
  return {
    Service: serviceYaml(name, {}, meta),
    EndpointSlice: o("discovery.k8s.io/v1", "EndpointSlice", {
      addressType: "IPv4",
      endpoints: [],
    }),
    Namespace: o("v1", "Namespace"),
    ConfigMap: o("v1", "ConfigMap", { data: { a: "b" } }),
    Lease: o("coordination.k8s.io/v1", "Lease", { spec: { holderIdentity: "x" } }),
    Pod: o("v1", "Pod", { spec: { containers: [{ name: "c", image: "busybox:1" }] } }),
    Node: o("v1", "Node"),
    Event: o("events.k8s.io/v1", "Event", {
      eventTime: "2026-01-01T00:00:00.000000Z",
      reportingController: "holdfast.io/controller",
      reportingInstance: "c-0",
      action: "Allocate",
      reason: "AddressAllocated",
      type: "Normal",
      regarding: { kind: "Service", name: "web", namespace: "default" },
    }),
    AddressPool: o("holdfast.io/v1alpha1", "AddressPool", {
      spec: { blocks: [{ cidr: "10.0.0.0/30" }] },
    }),
  };
}

Deno.test("validation: object names follow each kind's rule", async (t) => {
  await using env = await kubectlEnv({ crdDirs: ["k8s/crds"] });
  await t.step("Service names are DNS-1035 labels (web.v1, 1web refused)", async () => {
    for (const name of ["web.v1", "1web"]) {
      await refused(
        env,
        ["create", "-f", "-"],
        serviceYaml(name),
        `The Service "${name}" is invalid: metadata.name: Invalid value: "${name}": ${DNS1035}`,
      );
    }
    await refused(
      env,
      ["create", "-f", "-"],
      serviceYaml("a".repeat(64)),
      "must be no more than 63 characters",
    );
    await env.ok(["create", "-f", "-"], serviceYaml("web-v1"));
  });
  await t.step("Namespace names are RFC 1123 labels (kc.dot refused)", async () => {
    await refused(
      env,
      ["create", "-f", "-"],
      objects("kc.dot").Namespace!,
      `The Namespace "kc.dot" is invalid: metadata.name: Invalid value: "kc.dot": ${LABEL}`,
    );
    await env.ok(["create", "-f", "-"], objects("kc-dot").Namespace!);
  });
  await t.step(
    "generateName follows the rule, a trailing '-' allowed ('web.' refused)",
    async () => {
      const gen = (prefix: string) =>
        JSON.stringify({ apiVersion: "v1", kind: "ConfigMap", metadata: { generateName: prefix } });
      await refused(
        env,
        ["create", "-f", "-"],
        gen("web."),
        'metadata.generateName: Invalid value: "web.": a lowercase RFC 1123 subdomain',
      );
      const made = await env.ok(["create", "-f", "-", "-o", "name"], gen("web-"));
      deepStrictEqual(made.startsWith("configmap/web-"), true, made);
    },
  );
  await t.step(
    "every other kind: RFC 1123 subdomains (Bad_Name refused, a.b accepted)",
    async () => {
      for (const [kind, body] of Object.entries(objects("Bad_Name"))) {
        if (kind === "Service" || kind === "Namespace") continue;
        await refused(env, ["create", "-f", "-"], body, 'metadata.name: Invalid value: "Bad_Name"');
        await refused(env, ["create", "-f", "-"], body, SUBDOMAIN);
      }
      for (const [kind, body] of Object.entries(objects("a.b"))) {
        if (kind === "Service" || kind === "Namespace") continue;
        await env.ok(["create", "-f", "-"], body);
      }
    },
  );
});

Deno.test("validation: label keys and values, on every kind", async (t) => {
  await using env = await kubectlEnv({ crdDirs: ["k8s/crds"] });
  const cases: [string, Record<string, string>, string][] = [
    ["a value of 64 characters", { app: "v".repeat(64) }, "must be no more than 63 characters"],
    [
      "the value 'a b'",
      { app: "a b" },
      `metadata.labels: Invalid value: "a b": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
    ],
    [
      "the key 'a/b/c'",
      { "a/b/c": "x" },
      `metadata.labels: Invalid value: "a/b/c": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`,
    ],
    ["the key 'Bad_/x'", { "Bad_/x": "x" }, 'Invalid value: "Bad_/x": prefix part a lowercase'],
    ["a key name of 64 characters", { ["k".repeat(64)]: "x" }, "name part must be no more"],
  ];
  for (const [what, labels, message] of cases) {
    await t.step(`${what} is refused`, async () => {
      for (const [kind, body] of Object.entries(objects("lbl", { labels }))) {
        const r = await env.kubectl(["create", "-f", "-"], { stdin: body });
        deepStrictEqual(r.code !== 0, true, `${kind} with ${what} must be refused`);
        deepStrictEqual(r.stderr.includes(message), true, `${kind}: ${r.stderr}`);
      }
    });
  }
  await t.step("kubectl label refuses a bad value on a stored object", async () => {
    await env.ok(["create", "-f", "-"], serviceYaml("web"));
    await refused(env, ["label", "service", "web", "app=a b"], undefined, "a valid label must");
    await env.ok(["label", "service", "web", "example.com/app=web_1.x"]);
  });
});

Deno.test("validation: annotations may total 262,144 bytes, no more", async (t) => {
  await using env = await kubectlEnv({ crdDirs: ["k8s/crds"] });
  const big = (n: number) => ({ annotations: { "example.com/a": "x".repeat(n - 13) } });
  await t.step("over the limit is refused on every kind", async () => {
    for (const [kind, body] of Object.entries(objects("big", big(262145)))) {
      const r = await env.kubectl(["create", "-f", "-"], { stdin: body });
      deepStrictEqual(r.code !== 0, true, `${kind} must be refused`);
      deepStrictEqual(
        r.stderr.includes("metadata.annotations: Too long: may not be more than 262144 bytes"),
        true,
        `${kind}: ${r.stderr}`,
      );
    }
  });
  await t.step("exactly the limit is accepted", async () => {
    await env.ok(["create", "-f", "-"], objects("big", big(262144)).ConfigMap!);
  });
  await t.step("an annotation key must be a qualified name", async () => {
    await refused(
      env,
      ["annotate", "configmap", "big", "a/b/c=x"],
      undefined,
      'metadata.annotations: Invalid value: "a/b/c": a qualified name',
    );
  });
});

Deno.test("validation: no new finalizer on an object being deleted; the 422 carries causes", async (t) => {
  await using env = await kubectlEnv({ crdDirs: ["k8s/crds"] });
  const held = objects("held", { finalizers: ["example.com/hold"] });
  for (const kind of ["ConfigMap", "Service", "AddressPool"]) {
    await t.step(kind, async () => {
      await env.ok(["create", "-f", "-"], held[kind]!);
      const res = kind.toLowerCase();
      await env.ok(["delete", res, "held", "--wait=false"]);
      await refused(
        env,
        [
          "patch",
          res,
          "held",
          "--type=merge",
          "-p",
          '{"metadata":{"finalizers":["example.com/hold","example.com/more"]}}',
        ],
        undefined,
        'metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"example.com/more"}',
      );
      await env.ok([
        "patch",
        res,
        "held",
        "--type=merge",
        "-p",
        '{"metadata":{"finalizers":null}}',
      ]);
      const gone = await env.kubectl(["get", res, "held"]);
      deepStrictEqual(gone.code !== 0, true, "the last finalizer removed, the object is gone");
    });
  }
  await t.step("a finalizer must be a qualified name", async () => {
    await refused(
      env,
      ["create", "-f", "-"],
      objects("bad", { finalizers: ["a/b/c"] }).ConfigMap!,
      'metadata.finalizers: Invalid value: "a/b/c": a qualified name',
    );
  });
  await t.step("the Status of a refusal: 422 Invalid with details.causes", async () => {
    const r = await call(env.server, "POST", "/api/v1/namespaces/default/configmaps", {
      metadata: { name: "Bad", labels: { "a/b/c": "x" } },
    });
    deepStrictEqual([r.code, r.body.reason, r.body.details.kind, r.body.details.name], [
      422,
      "Invalid",
      "ConfigMap",
      "Bad",
    ]);
    deepStrictEqual(
      r.body.details.causes.map((c: { reason: string; field: string }) => [c.reason, c.field]),
      [["FieldValueInvalid", "metadata.name"], ["FieldValueInvalid", "metadata.labels"]],
    );
  });
});

Deno.test("validation: ConfigMap keys and Lease counters", async (t) => {
  await using env = await kubectlEnv();
  await t.step("a ConfigMap key outside [-._a-zA-Z0-9] is refused", async () => {
    await refused(
      env,
      ["create", "-f", "-"],
      JSON.stringify({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name: "cm" },
        data: { "a/b": "x" },
      }),
      `data[a/b]: Invalid value: "a/b": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`,
    );
  });
  await t.step("a Lease with negative leaseTransitions is refused", async () => {
    await refused(
      env,
      ["create", "-f", "-"],
      JSON.stringify({
        apiVersion: "coordination.k8s.io/v1",
        kind: "Lease",
        metadata: { name: "l" },
        spec: { leaseTransitions: -1 },
      }),
      "spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0",
    );
  });
});
