//! Goal: the server source is chosen in the documented order, a forced
//! source never falls back, and a missing server explains how to provide one.

use std::path::PathBuf;

use connreg_pgtest::{Environment, ProvisionError, ServerSource};

fn offering(url: bool, local: bool, docker: bool) -> Environment {
    Environment {
        forced: None,
        database_url: url.then(|| "postgres://postgres@127.0.0.1:5432/postgres".to_owned()),
        bindir: local.then(|| PathBuf::from("/usr/lib/postgresql/15/bin")),
        docker_available: docker,
    }
}

#[test]
fn url_is_chosen_over_local_binaries_and_docker() {
    assert_eq!(offering(true, true, true).choose(), Ok(ServerSource::Url));
}

#[test]
fn local_binaries_are_chosen_over_docker() {
    assert_eq!(
        offering(false, true, true).choose(),
        Ok(ServerSource::Local)
    );
}

#[test]
fn docker_is_chosen_when_it_is_all_there_is() {
    assert_eq!(
        offering(false, false, true).choose(),
        Ok(ServerSource::Docker)
    );
}

#[test]
fn nothing_available_gives_no_server() {
    assert_eq!(
        offering(false, false, false).choose(),
        Err(ProvisionError::NoServer)
    );
}

#[test]
fn no_server_message_says_how_to_provide_one() {
    let message = ProvisionError::NoServer.to_string();
    for needed in [
        "CONNREG_TEST_DATABASE_URL=postgres://",
        "apt-get install postgresql",
        "Docker engine",
    ] {
        assert!(message.contains(needed), "{message:?} lacks {needed:?}");
    }
}

#[test]
fn forcing_docker_without_an_engine_fails_instead_of_falling_back() {
    let environment = Environment {
        forced: Some(ServerSource::Docker),
        ..offering(true, true, false)
    };
    let error = environment.choose().expect_err("docker is unavailable");
    assert!(
        matches!(
            error,
            ProvisionError::SourceUnavailable {
                requested: ServerSource::Docker,
                ..
            }
        ),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains("CONNREG_TEST_PG=docker"), "{message}");
    assert!(message.contains("Docker engine"), "{message}");
}

#[test]
fn forcing_url_without_a_url_names_the_variable_to_set() {
    let environment = Environment {
        forced: Some(ServerSource::Url),
        ..offering(false, true, true)
    };
    let message = environment.choose().expect_err("no URL").to_string();
    assert!(message.contains("CONNREG_TEST_DATABASE_URL"), "{message}");
}

#[test]
fn forcing_an_available_source_skips_the_earlier_ones() {
    let environment = Environment {
        forced: Some(ServerSource::Local),
        ..offering(true, true, false)
    };
    assert_eq!(environment.choose(), Ok(ServerSource::Local));
}

#[test]
fn unknown_forced_source_names_are_rejected() {
    let error = "podman".parse::<ServerSource>().expect_err("not a source");
    assert!(
        matches!(
            error,
            ProvisionError::InvalidSetting {
                variable: "CONNREG_TEST_PG",
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(" Local ".parse::<ServerSource>(), Ok(ServerSource::Local));
}
