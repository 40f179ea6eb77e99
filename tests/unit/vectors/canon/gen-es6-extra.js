// gen-es6-extra.js — regenerates es6-extra.txt with a real ECMAScript engine (node >= 16):
//   node gen-es6-extra.js > es6-extra.txt
// Each line: IEEE-754 bits as lowercase hex without leading zeros, ',', String(x) (which is
// Number.prototype.toString, the form RFC 8785 uses). Deterministic (fixed xorshift seed).
'use strict';
const buf = Buffer.alloc(8);
const bitsOf = (x) => { buf.writeDoubleLE(x); return buf.readBigUInt64LE(); };
const ofBits = (b) => { buf.writeBigUInt64LE(BigInt.asUintN(64, b)); return buf.readDoubleLE(); };
let state = 0x9e3779b97f4a7c15n;
const next = () => {
    state ^= (state << 13n) & 0xffffffffffffffffn;
    state ^= state >> 7n;
    state ^= (state << 17n) & 0xffffffffffffffffn;
    return state;
};
const out = [];
const emit = (b) => {
    const x = ofBits(b);
    if (!Number.isFinite(x) || x === 0) return;
    out.push(BigInt.asUintN(64, b).toString(16) + ',' + String(x));
};
// Random doubles between 2^-13 and 2^54 (the exact 128-bit path and its borders), both signs.
for (let i = 0; i < 1500; i++) {
    const be = BigInt(1075 - 66) + next() % 69n;
    emit((next() & 0x8000000000000000n) | (be << 52n) | (next() & 0xfffffffffffffn));
}
// Powers of two (narrower lower interval) and their neighbours, across the whole range.
for (let e = -1074; e <= 1023; e += (e > -20 && e < 60) ? 1 : 7) {
    const b = bitsOf(Math.pow(2, e));
    for (const d of [-1n, 0n, 1n]) emit(b + d);
}
// Around powers of ten (digit-count boundaries).
for (let p = -8; p <= 23; p++) {
    const b = bitsOf(Number('1e' + p));
    for (const d of [-2n, -1n, 0n, 1n, 2n]) emit(b + d);
}
// Decimals of 1 to 17 significant digits at many scales.
for (let i = 0; i < 400; i++) {
    const k = 1 + Number(next() % 17n);
    const digits = (next() % (10n ** BigInt(k))).toString();
    const scale = Number(next() % 40n) - 20;
    emit(bitsOf(Number(digits + 'e' + scale)));
}
process.stdout.write(out.join('\n') + '\n');
