/**
 * Code-point order of strings, the order of UTF-8 bytes and of MySQL's
 * `utf8mb4_bin`. JavaScript's `<` compares UTF-16 code units instead, which
 * puts U+E000-U+FFFF after astral characters (emoji); every storage must list
 * users in one order, so the memory storage sorts with this.
 */
export function compareCodePoints(a: string, b: string): number {
  const length = Math.min(a.length, b.length);
  for (let i = 0; i < length; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return codePointRank(x) - codePointRank(y);
  }
  return a.length - b.length;
}

// Moves surrogates (D800-DFFF) above E000-FFFF, keeping order inside each range.
function codePointRank(unit: number): number {
  if (unit < 0xd800) return unit;
  return unit <= 0xdfff ? unit + 0x2000 : unit - 0x800;
}
