import { assertEquals, assertRejects } from "../testing.ts";
import { DEFAULT_CONFIG_YAML, parseConfig } from "./file_source.ts";

Deno.test("file source: the embedded default config parses", () => {
  const cfg = parseConfig(DEFAULT_CONFIG_YAML);
  assertEquals(cfg.services.map((s) => [s.name, s.frontends.length, s.backends.length]), [[
    "default/demo",
    1,
    2,
  ]]);
});

Deno.test("file source: JSON works and errors name the offending path", async () => {
  const cfg = parseConfig(
    '{"services":[{"name":"a/b","frontends":["10.0.0.1:80/TCP"],"backends":[{"address":"10.1.0.1:80/TCP","weight":5}]}]}',
    { format: "json" },
  );
  assertEquals(cfg.services[0]!.backends[0]!.weight, 5);
  await assertRejects(
    () => parseConfig("services:\n  - name: a/b\n    frontends: [10.0.0.1:99999/TCP]\n"),
    "$.services[0].frontends[0].address",
  );
  await assertRejects(
    () => parseConfig("services:\n  - name: nons\n"),
    '"nons" is not namespace/name',
  );
  await assertRejects(
    () => parseConfig("services:\n  - name: a/b\n    maglevSize: 1000\n"),
    "must be prime",
  );
  await assertRejects(() => parseConfig("servces: []\n"), "$.servces: unknown key");
});
