import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isLoopbackHost, resolveBoardAccess } from '../../src/serving/auth.js';

describe('isLoopbackHost', () => {
  it('accepts localhost, 127.0.0.0/8 and ::1 in any spelling', () => {
    for (const host of ['localhost', 'LOCALHOST', '127.0.0.1', '127.8.9.10', '::1', '[::1]', '0:0:0:0:0:0:0:1', '::ffff:127.0.0.1']) {
      assert.equal(isLoopbackHost(host), true, host);
    }
  });

  it('rejects wildcard, private and public addresses and names', () => {
    for (const host of ['0.0.0.0', '::', '', '10.0.0.5', '128.0.0.1', '::2', '::ffff:10.0.0.1', 'fe80::1%eth0', 'example.com', 'localhost.example.com', '127.1']) {
      assert.equal(isLoopbackHost(host), false, host);
    }
  });
});

describe('resolveBoardAccess', () => {
  it('keeps the credentials that are set, and requires none on loopback', () => {
    assert.deepEqual(resolveBoardAccess({ user: 'ops', password: 'pw' }, '0.0.0.0'), { credentials: { basic: { user: 'ops', password: 'pw' } } });
    assert.deepEqual(resolveBoardAccess({ token: 't', insecure: true }, '0.0.0.0'), { credentials: { token: 't' } });
    const open = resolveBoardAccess({}, '::1');
    assert.equal(open.credentials, undefined);
    assert.match(open.warning ?? '', /unauthenticated/);
  });

  it('rejects a user name that basic auth cannot carry', () => {
    assert.throws(() => resolveBoardAccess({ user: 'a:b', password: 'pw' }, '127.0.0.1'), /must not contain ":"/);
  });
});
