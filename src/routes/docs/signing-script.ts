/**
 * The page's signing code, served as `/docs/<version>/signing.js`. Web Crypto
 * has no SHA-224, so this is SHA-224 and its HMAC in plain JavaScript, with
 * the canonical message of src/signing/index.ts: the merchant's key stays in
 * the page. Tested against `node:crypto` and test/fixtures/signing-vectors.json
 * (test/routes/docs-signing.test.ts), by running this very text.
 *
 * Plain ES2017 text without template literals, so it reads the same here and in the browser.
 */
export const SIGNING_SCRIPT = String.raw`'use strict';
(function (root) {
  var K = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2
  ];
  // SHA-224 is SHA-256 from other initial values, cut to 7 words (FIPS 180-4).
  var INITIAL = [0xc1059ed8, 0x367cd507, 0x3070dd17, 0xf70e5939, 0xffc00b31, 0x68581511, 0x64f98fa7, 0xbefa4fa4];

  function rotr(x, n) { return (x >>> n) | (x << (32 - n)); }

  /** SHA-224 of bytes, as 28 bytes. */
  function sha224(bytes) {
    var length = bytes.length;
    var padded = new Uint8Array(((length + 9 + 63) >> 6) << 6);
    padded.set(bytes);
    padded[length] = 0x80;
    var view = new DataView(padded.buffer);
    view.setUint32(padded.length - 8, Math.floor(length / 0x20000000));
    view.setUint32(padded.length - 4, (length << 3) >>> 0);
    var h = INITIAL.slice();
    var w = new Array(64);
    for (var offset = 0; offset < padded.length; offset += 64) {
      for (var i = 0; i < 16; i++) w[i] = view.getUint32(offset + i * 4);
      for (i = 16; i < 64; i++) {
        var s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >>> 3);
        var s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >>> 10);
        w[i] = (w[i - 16] + s0 + w[i - 7] + s1) | 0;
      }
      var a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
      for (i = 0; i < 64; i++) {
        var t1 = (k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i]) | 0;
        var t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) | 0;
        k = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
      }
      h[0] = (h[0] + a) | 0; h[1] = (h[1] + b) | 0; h[2] = (h[2] + c) | 0; h[3] = (h[3] + d) | 0;
      h[4] = (h[4] + e) | 0; h[5] = (h[5] + f) | 0; h[6] = (h[6] + g) | 0; h[7] = (h[7] + k) | 0;
    }
    var out = new Uint8Array(28);
    var outView = new DataView(out.buffer);
    for (i = 0; i < 7; i++) outView.setUint32(i * 4, h[i]);
    return out;
  }

  function utf8(text) { return new TextEncoder().encode(text); }

  function hex(bytes) {
    var out = '';
    for (var i = 0; i < bytes.length; i++) out += (bytes[i] < 16 ? '0' : '') + bytes[i].toString(16);
    return out;
  }

  /** Lower-case hex HMAC-SHA224 (RFC 2104, block of 64 bytes) of a text, keyed with a text. */
  function hmacSha224Hex(secret, message) {
    var key = utf8(secret);
    if (key.length > 64) key = sha224(key);
    var inner = new Uint8Array(64);
    var outer = new Uint8Array(64);
    for (var i = 0; i < 64; i++) {
      inner[i] = (key[i] || 0) ^ 0x36;
      outer[i] = (key[i] || 0) ^ 0x5c;
    }
    var body = utf8(message);
    var first = new Uint8Array(64 + body.length);
    first.set(inner);
    first.set(body, 64);
    var second = new Uint8Array(64 + 28);
    second.set(outer);
    second.set(sha224(first), 64);
    return hex(sha224(second));
  }

  /** Every UTF-8 byte escaped but A-Z a-z 0-9 - . _ ~ (docs/protocol.md#signing). */
  function pct(value) {
    return encodeURIComponent(value).replace(/[!'()*]/g, function (c) { return '%' + c.charCodeAt(0).toString(16).toUpperCase(); });
  }

  function compare(a, b) { return a < b ? -1 : a > b ? 1 : 0; }

  /** The canonical message: METHOD & pct(url) & pct(sorted pct(k)=pct(v) pairs), without hmac and gettoken. */
  function canonicalMessage(method, url, pairs) {
    var encoded = pairs
      .filter(function (pair) { return pair[0] !== 'hmac' && pair[0] !== 'gettoken'; })
      .map(function (pair) { return [pct(pair[0]), pct(pair[1])]; })
      .sort(function (x, y) { return compare(x[0], y[0]) || compare(x[1], y[1]); });
    var joined = encoded.map(function (pair) { return pair[0] + '=' + pair[1]; }).join('&');
    return method.toUpperCase() + '&' + pct(url) + '&' + pct(joined);
  }

  /** A URL with cp, a fresh ts and salt, and hmac: what a merchant's own code would send. */
  function signUrl(method, address, merchantId, key, nowSeconds, salt) {
    var url = new URL(address);
    url.searchParams.delete('hmac');
    url.searchParams.set('cp', merchantId);
    url.searchParams.set('ts', String(nowSeconds));
    url.searchParams.set('salt', salt);
    var pairs = Array.from(url.searchParams.entries());
    var base = url.origin + url.pathname;
    url.searchParams.set('hmac', hmacSha224Hex(key, canonicalMessage(method, base, pairs)));
    return url.toString();
  }

  root.merchantApiSigning = { sha224: sha224, hmacSha224Hex: hmacSha224Hex, canonicalMessage: canonicalMessage, signUrl: signUrl };
})(globalThis);
`;
