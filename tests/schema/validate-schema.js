// SPDX-License-Identifier: MIT
// Validates JSON files against one of pyrsprof's own JSON Schemas (docs/*.schema.json, draft-07)
// with ajv in strict mode (so the schema itself must be well-formed). Usage:
//   node validate-schema.js SCHEMA FILE...
// Exit 0 if every file is valid, 1 if not (the errors on stderr, one line each: "FILE: /path
// message"), 2 on a usage or setup error. Also a module: validateFiles() is the loop that
// validate-speedscope.js uses too.
'use strict';
const fs = require('fs');

// Checks each file with validate (an ajv validate function) and then extra(doc) (returns a list of
// messages; only called when the schema passed). Prints the errors; returns how many files failed.
function validateFiles(validate, files, extra) {
  let bad = 0;
  for (const file of files) {
    let doc;
    try {
      doc = JSON.parse(fs.readFileSync(file, 'utf8'));
    } catch (e) {
      console.error(`${file}: not JSON: ${e.message}`);
      bad++;
      continue;
    }
    const errors = [];
    if (!validate(doc))
      for (const e of validate.errors.slice(0, 20))
        errors.push(`schema: ${e.instancePath || '/'} ${e.message}`);
    else if (extra)
      errors.push(...extra(doc));
    if (errors.length) {
      bad++;
      for (const e of errors) console.error(`${file}: ${e}`);
    }
  }
  return bad;
}

module.exports = { validateFiles };

if (require.main === module) {
  const Ajv = require('ajv');
  if (process.argv.length < 4) {
    console.error('usage: node validate-schema.js SCHEMA FILE...');
    process.exit(2);
  }
  let validate;
  try {
    const schema = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
    validate = new Ajv({ allErrors: true, strict: true, strictTypes: false }).compile(schema);
  } catch (e) {
    console.error(`${process.argv[2]}: bad schema: ${e.message}`);
    process.exit(2);
  }
  process.exit(validateFiles(validate, process.argv.slice(3)) ? 1 : 0);
}
