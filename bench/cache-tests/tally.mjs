// tally.mjs RESULTS.json... — counts http-cache-tests results the way the
// suite's own display (lib/display.mjs) classes them: required tests passed
// (of required), optimal ones passed (of optimal), checks answered yes (of
// check), with dependency failures and setup failures counted as not passed.
// Run from the http-cache-tests package directory (it imports its modules).
import fs from 'fs'
import path from 'path'
import { pathToFileURL } from 'url'

const pkg = process.env.CACHE_TESTS_DIR || process.cwd()
const tests = (await import(pathToFileURL(path.join(pkg, 'tests/index.mjs')))).default
const surrogate = (await import(pathToFileURL(path.join(pkg, 'tests/surrogate-control.mjs')))).default
tests.push(surrogate)

// determineTestResult without the browser-only DOM imports of display.mjs.
function lookup (id) {
  for (const s of tests) for (const t of s.tests) if (t.id === id) return t
  throw new Error(`no test ${id}`)
}
function result (id, res) {
  const t = lookup(id)
  const r = res[id]
  if (r === undefined) return 'untested'
  for (const dep of t.depends_on || []) {
    const d = result(dep, res)
    if (d !== 'pass' && d !== 'yes') return 'dependency'
  }
  if (r[0] === 'Setup') return 'setup'
  const kind = t.kind || 'required'
  if (kind === 'check') return r === true ? 'yes' : 'no'
  return r === true ? 'pass' : (kind === 'optimal' ? 'optional_fail' : 'fail')
}

const args = process.argv.slice(2)
const verbose = args[0] === '-v'
for (const file of verbose ? args.slice(1) : args) {
  const res = JSON.parse(fs.readFileSync(file, 'utf8'))
  const n = { required: [0, 0], optimal: [0, 0], check: [0, 0] }
  const failed = []
  for (const s of tests) {
    for (const t of s.tests) {
      if (t.browser_only) continue
      const kind = t.kind || 'required'
      const r = result(t.id, res)
      if (r === 'untested') continue
      n[kind][1]++
      if (r === 'pass' || r === 'yes') n[kind][0]++
      else if (kind !== 'check') failed.push(`${kind} ${r} ${t.id}`)
    }
  }
  console.log(`${path.basename(file, '.json')}: required ${n.required[0]}/${n.required[1]}, optimal ${n.optimal[0]}/${n.optimal[1]}, check ${n.check[0]}/${n.check[1]}`)
  if (verbose) failed.forEach(f => console.log('  ' + f))
}
