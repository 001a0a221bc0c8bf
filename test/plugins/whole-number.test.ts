import fc from "fast-check";
import t from "tap";
import { BIGINT_MAX, parseWholeNumber, wholeNumberPattern } from "../../src/http/whole-number.js";

t.test("wholeNumberPattern accepts exactly the canonical spellings of min..max", async (t) => {
  const ranges = [
    { min: 0n, max: BIGINT_MAX },
    { min: 1n, max: 100n },
    { min: 37n, max: 4096n },
    { min: 0n, max: 0n },
    { min: 10n, max: 10n },
  ];
  for (const range of ranges) {
    const pattern = new RegExp(wholeNumberPattern(range), "u");
    const near = fc.oneof(
      fc.bigInt({ min: 0n, max: range.max * 2n + 10n }),
      fc.constantFrom(range.min - 1n, range.min, range.max, range.max + 1n).filter((n) => n >= 0n),
    );
    fc.assert(
      fc.property(
        near,
        (n) => pattern.test(String(n)) === (n >= range.min && n <= range.max) && (parseWholeNumber(String(n), range) !== undefined) === pattern.test(String(n)),
      ),
    );
    for (const spelling of ["", "-1", "01", "00", "1.0", "1e3", " 1", "0x1", "+1", "１"]) {
      t.notOk(pattern.test(spelling), `${range.min}..${range.max} refuses "${spelling}"`);
      t.equal(parseWholeNumber(spelling, range), undefined);
    }
  }
  t.ok(new RegExp(wholeNumberPattern({ min: 0, max: BIGINT_MAX })).test("9223372036854775807"));
  t.notOk(new RegExp(wholeNumberPattern({ min: 0, max: BIGINT_MAX })).test("9223372036854775808"));
});
