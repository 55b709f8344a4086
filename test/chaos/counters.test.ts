import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { HttpRequestCounter, RespCommandCounter } from '../../bench/resp-counter.js';

const resp = (...args: string[]): string => `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;

describe('request counters of the coordination benchmark', () => {
  it('counts RESP commands by name, however the bytes are split', () => {
    const stream = Buffer.from(resp('evalsha', 'abc', '1', 'key\r\nwith crlf') + resp('HGETALL', 'lease') + resp('EVALSHA', 'def', '0'));
    for (const size of [1, 3, 7, stream.length]) {
      const counter = new RespCommandCounter();
      for (let i = 0; i < stream.length; i += size) counter.push(stream.subarray(i, i + size));
      assert.deepEqual(Object.fromEntries(counter.byCommand), { EVALSHA: 2, HGETALL: 1 }, `chunks of ${size}`);
      assert.equal(counter.total, 3);
    }
  });

  it('counts the commands of several connections whose chunks interleave, each split anywhere', () => {
    const first = Buffer.from(resp('EVALSHA', 'abc', '1', 'k') + resp('GET', 'a'));
    const second = Buffer.from(resp('XREAD', 'BLOCK', '0', 'STREAMS', 's', '$') + resp('PING'));
    const counter = new RespCommandCounter();
    for (let i = 0; i < Math.max(first.length, second.length); i += 5) {
      counter.push(first.subarray(i, i + 5), 1);
      counter.push(second.subarray(i, i + 5), 2);
    }
    assert.deepEqual(Object.fromEntries(counter.byCommand), { EVALSHA: 1, GET: 1, XREAD: 1, PING: 1 });
  });

  it('counts HTTP requests by method, however the bytes are split', () => {
    const request = (method: string, body = ''): string =>
      `${method} /apis/coordination.k8s.io/v1/namespaces/default/leases/leasebeat HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    const stream = Buffer.from(request('GET') + request('PUT', '{"spec":{"holderIdentity":"PUT /apis/x"}}') + request('GET'));
    for (const size of [1, 5, 13, stream.length]) {
      const counter = new HttpRequestCounter();
      for (let i = 0; i < stream.length; i += size) counter.push(stream.subarray(i, i + size));
      assert.deepEqual(Object.fromEntries(counter.byMethod), { GET: 2, PUT: 1 }, `chunks of ${size}`);
    }
  });
});
