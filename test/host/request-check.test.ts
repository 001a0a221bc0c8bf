import t from "tap";
import { checkRequest, claimsToBeThisMachine, compareNetworks, describeAge } from "../../src/web/request-check.js";

/** What the /device page decides to warn about (the page itself is tested in device-authorization.test.ts). */

t.test("one network: the same IPv4 /24 or IPv6 /64, of the same kind", async (t) => {
  const cases: [string | null, string | null, string][] = [
    ["192.168.1.20", "192.168.1.77", "same"],
    ["192.168.1.20", "192.168.2.77", "different"],
    ["::ffff:192.168.1.20", "192.168.1.77", "same"],
    ["127.0.0.1", "::1", "same"],
    ["127.0.0.1", "203.0.113.9", "different"],
    ["10.0.0.5", "203.0.113.9", "different"],
    ["203.0.113.9", "203.0.113.200", "same"],
    ["198.51.100.7", "203.0.113.9", "different"],
    ["2001:db8:1:2::5", "2001:db8:1:2:abcd::1", "same"],
    ["2001:db8:1:2::5", "2001:db8:1:3::5", "different"],
    ["[fe80::1%eth0]", "fe80::2", "same"],
    ["203.0.113.9", "2001:db8::1", "different"],
    [null, "203.0.113.9", "unknown"],
    ["not an address", "203.0.113.9", "unknown"],
  ];
  for (const [requester, approver, verdict] of cases) t.equal(compareNetworks(requester, approver), verdict, `${requester} vs ${approver}`);
});

t.test("names that pose as the approver's machine", async (t) => {
  for (const name of ["MacBook Pro (this computer)", "This device", "your laptop", "my Mac", "localhost", "ｔｈｉｓ ｃｏｍｐｕｔｅｒ"])
    t.ok(claimsToBeThisMachine(name), name);
  for (const name of ["build-box", "Alice's MacBook Pro", "thinkpad-x1", "office desktop"]) t.notOk(claimsToBeThisMachine(name), name);
});

t.test("age in words; two minutes is old", async (t) => {
  t.equal(describeAge(10_000), "less than a minute ago");
  t.equal(describeAge(60_000), "1 minute ago");
  t.equal(describeAge(9 * 60_000 + 59_000), "9 minutes ago");
  t.equal(describeAge(3 * 3_600_000), "3 hours ago");
  const now = Date.parse("2026-11-01T12:00:00Z");
  const at = (minutesAgo: number) => new Date(now - minutesAgo * 60_000).toISOString();
  t.match(checkRequest({ request_ip: "203.0.113.9", requested_at: at(1), device_name: "box" }, "203.0.113.10", now), {
    network: "same",
    stale: false,
    selfClaim: false,
  });
  t.match(checkRequest({ request_ip: "203.0.113.9", requested_at: at(2), device_name: "box" }, "10.0.0.1", now), {
    network: "different",
    stale: true,
    age: "2 minutes ago",
  });
  t.match(checkRequest({ request_ip: null, requested_at: null, device_name: "box" }, "10.0.0.1", now), { network: "unknown", stale: false, age: null });
});
