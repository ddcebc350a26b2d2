//! The debuginfod client against a local server (Python's http.server on 127.0.0.1 over a
//! folder laid out as `buildid/HEX/debuginfo`): a debug file made here with `objcopy
//! --only-keep-debug` from a program built here is downloaded by build id into the cache,
//! served from the cache once the server is gone, and a build id no server has is missing;
//! a server that cannot be reached is not asked again, and the next one is.

use coldstart_record::assemble::debuginfod::{Debuginfod, Lookup};
use coldstart_testkit::{debuginfod_server, private_dir, stripped_program};
use std::time::Duration;

const PROGRAM: &str = "static int hidden(int x) { return x * 3 + 1; }\nint main(int c, char **v) { (void)v; return hidden(c) == 4 ? 0 : 1; }\n";
const BUILD_ID: &str = "c01d57a27000000000000000000000000000d1d0";

#[test]
fn a_debug_file_is_downloaded_by_build_id_then_served_from_the_cache() {
    let test = "a_debug_file_is_downloaded_by_build_id";
    let dir = private_dir!();
    let Some((_, debug)) = stripped_program(test, dir.path(), "hidden", PROGRAM, &["-O1"], BUILD_ID) else {
        return;
    };
    let Some(mut server) = debuginfod_server(test, &dir.path().join("server")) else { return };
    server.serve(BUILD_ID, &debug);
    let cache = dir.path().join("cache");
    let client = Debuginfod::new(vec![server.url.clone()], cache.clone(), Duration::from_secs(20), None);
    let expected = std::fs::read(&debug).unwrap();

    match client.debuginfo(BUILD_ID) {
        Lookup::Downloaded(data) => assert_eq!(data, expected),
        other => panic!("expected a download, got {other:?}"),
    }
    assert_eq!(std::fs::read(cache.join(BUILD_ID).join("debuginfo")).unwrap(), expected);
    assert!(
        matches!(client.debuginfo("00000000000000000000000000000000000000ff"), Lookup::Missing),
        "a build id the server does not have"
    );

    server.stop();
    match client.debuginfo(BUILD_ID) {
        Lookup::Cached(data) => assert_eq!(data, expected),
        other => panic!("expected the cached file, got {other:?}"),
    }
    match client.debuginfo("00000000000000000000000000000000000000fe") {
        Lookup::Failed(why) => assert!(why.starts_with(&server.url), "{why}"),
        other => panic!("the server is gone: expected a failure, got {other:?}"),
    }
    match client.debuginfo("00000000000000000000000000000000000000fd") {
        Lookup::Failed(why) => assert!(why.contains("not asked again"), "{why}"),
        other => panic!("an unreachable server is not asked again: got {other:?}"),
    }
}

#[test]
fn a_lookup_goes_on_to_the_next_server_when_one_cannot_be_reached() {
    let test = "a_lookup_goes_on_to_the_next_server";
    let dir = private_dir!();
    let Some((_, debug)) = stripped_program(test, dir.path(), "hidden", PROGRAM, &["-O1"], BUILD_ID) else {
        return;
    };
    let Some(mut gone) = debuginfod_server(test, &dir.path().join("gone")) else { return };
    gone.stop();
    let Some(server) = debuginfod_server(test, &dir.path().join("server")) else { return };
    server.serve(BUILD_ID, &debug);
    let urls = vec![gone.url.clone(), server.url.clone()];
    let client = Debuginfod::new(urls, dir.path().join("cache"), Duration::from_secs(20), None);
    match client.debuginfo(BUILD_ID) {
        Lookup::Downloaded(data) => assert_eq!(data, std::fs::read(&debug).unwrap()),
        other => panic!("expected a download from the second server, got {other:?}"),
    }
    match client.debuginfo("00000000000000000000000000000000000000fc") {
        Lookup::Failed(why) => {
            assert!(why.starts_with(&gone.url) && why.contains("not asked again"), "{why}")
        }
        other => panic!("the first server is still unreachable: got {other:?}"),
    }
}

#[test]
fn a_server_that_answers_with_something_else_than_an_elf_file_is_not_cached() {
    let test = "a_server_that_answers_with_something_else";
    let dir = private_dir!();
    let Some(server) = debuginfod_server(test, &dir.path().join("server")) else { return };
    let page = dir.path().join("page.html");
    std::fs::write(&page, "<html>not found</html>").unwrap();
    server.serve(BUILD_ID, &page);
    let cache = dir.path().join("cache");
    let client = Debuginfod::new(vec![server.url.clone()], cache.clone(), Duration::from_secs(20), None);
    assert!(matches!(client.debuginfo(BUILD_ID), Lookup::Failed(_)));
    assert!(!cache.join(BUILD_ID).join("debuginfo").exists());
}

#[test]
fn a_debug_file_over_debuginfod_maxsize_is_refused_and_its_server_still_asked() {
    let test = "a_debug_file_over_debuginfod_maxsize";
    let dir = private_dir!();
    let Some((_, debug)) = stripped_program(test, dir.path(), "hidden", PROGRAM, &["-O1"], BUILD_ID) else {
        return;
    };
    let Some(server) = debuginfod_server(test, &dir.path().join("server")) else { return };
    server.serve(BUILD_ID, &debug);
    let size = std::fs::metadata(&debug).unwrap().len();
    let cache = dir.path().join("cache");
    let small =
        Debuginfod::new(vec![server.url.clone()], cache.clone(), Duration::from_secs(20), Some(size - 1));
    match small.debuginfo(BUILD_ID) {
        Lookup::Failed(why) => assert!(why.contains("DEBUGINFOD_MAXSIZE"), "{why}"),
        other => panic!("a file over the limit: expected a failure, got {other:?}"),
    }
    assert!(!cache.join(BUILD_ID).join("debuginfo").exists());
    assert!(
        matches!(small.debuginfo("00000000000000000000000000000000000000fb"), Lookup::Missing),
        "the server is still asked after a file over the limit"
    );
    let enough = Debuginfod::new(vec![server.url.clone()], cache, Duration::from_secs(20), Some(size));
    assert!(matches!(enough.debuginfo(BUILD_ID), Lookup::Downloaded(_)));
}
