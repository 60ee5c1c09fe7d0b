//! Profiles: named sets of config keys shipped with pronghorn (`profiles/*.toml` in the
//! repository, embedded in the binary), laid under a user's config by `pronghorn run --profile
//! NAME`. A profile is data: it sets existing keys only, each with a comment above it saying
//! why, and the user's explicit keys win over it. This module owns finding a profile by name,
//! merging it with a config's text and saying which key came from where.

use std::path::Path;

use crate::{Config, ConfigError};

/// A profile shipped with pronghorn.
pub struct Profile {
    pub name: &'static str,
    /// Its TOML text, comments included.
    pub text: &'static str,
}

/// Every shipped profile, by name.
pub const PROFILES: &[Profile] = &[
    Profile { name: "latency", text: include_str!("../../../profiles/latency.toml") },
    Profile { name: "throughput", text: include_str!("../../../profiles/throughput.toml") },
    Profile { name: "redis", text: include_str!("../../../profiles/redis.toml") },
    Profile { name: "nginx", text: include_str!("../../../profiles/nginx.toml") },
    Profile { name: "postgres", text: include_str!("../../../profiles/postgres.toml") },
    Profile { name: "nginx-reload", text: include_str!("../../../profiles/nginx-reload.toml") },
];

/// One key a profile sets, and whether the user's config set it too (and so wins).
#[derive(Debug, PartialEq)]
pub struct Setting {
    /// `section.key`, as docs/config.md names it.
    pub key: String,
    pub profile_value: String,
    /// The user's value, which is the one used, when the user's config sets the key.
    pub user_value: Option<String>,
    /// The profile's comment above the key: why it sets it.
    pub why: String,
}

/// A user's config with a profile laid under it.
#[derive(Debug)]
pub struct Merged {
    pub config: Config,
    /// The merged config as TOML, for the process to read.
    pub text: String,
    pub settings: Vec<Setting>,
}

impl Profile {
    /// The shipped profile called `name`, or an error that lists the known ones.
    pub fn named(name: &str) -> Result<&'static Profile, String> {
        PROFILES.iter().find(|p| p.name == name).ok_or_else(|| {
            let known: Vec<&str> = PROFILES.iter().map(|p| p.name).collect();
            format!("unknown profile \"{name}\": the profiles are {}", known.join(", "))
        })
    }

    /// `user_text` (the config at `path`) with this profile's keys added where the user's
    /// config does not set them. The user's config must be valid on its own, and so must the
    /// merge.
    pub fn apply(&self, user_text: &str, path: &Path) -> Result<Merged, ConfigError> {
        Config::parse(user_text, path)?;
        let invalid = |message: String| ConfigError::Invalid {
            path: path.to_owned(),
            location: String::new(),
            message: format!("with profile {}: {message}", self.name),
        };
        let mut merged: toml::Table = user_text.parse().map_err(|e: toml::de::Error| invalid(e.to_string()))?;
        let profile: toml::Table = self.text.parse().map_err(|e: toml::de::Error| invalid(e.to_string()))?;
        let whys = self.whys();
        let mut settings = Vec::new();
        for (section, keys) in &profile {
            let Some(keys) = keys.as_table() else {
                return Err(invalid(format!("`{section}` is not a section")));
            };
            let target = merged.entry(section.clone()).or_insert_with(|| toml::Value::Table(toml::Table::new()));
            let Some(target) = target.as_table_mut() else {
                return Err(invalid(format!("`{section}` is not a section in the config")));
            };
            for (key, value) in keys {
                let name = format!("{section}.{key}");
                let user_value = target.get(key).map(|v| v.to_string());
                if user_value.is_none() {
                    target.insert(key.clone(), value.clone());
                }
                let why = whys.iter().find(|(k, _)| *k == name).map(|(_, w)| w.clone()).unwrap_or_default();
                settings.push(Setting { key: name, profile_value: value.to_string(), user_value, why });
            }
        }
        let text = toml::to_string(&merged).map_err(|e| invalid(e.to_string()))?;
        let config = Config::parse(&text, path).map_err(|e| match e {
            ConfigError::Invalid { message, .. } => invalid(message),
            other => other,
        })?;
        Ok(Merged { config, text, settings })
    }

    /// Each key's comment (the `#` lines right above it), by `section.key`.
    fn whys(&self) -> Vec<(String, String)> {
        let mut section = String::new();
        let mut comment: Vec<&str> = Vec::new();
        let mut whys = Vec::new();
        for line in self.text.lines().map(str::trim) {
            if let Some(c) = line.strip_prefix('#') {
                comment.push(c.trim());
            } else if let Some(s) = line.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
                section = s.trim().to_owned();
                comment.clear();
            } else if let Some((key, _)) = line.split_once('=') {
                whys.push((format!("{section}.{}", key.trim()), comment.join(" ")));
                comment.clear();
            } else {
                comment.clear();
            }
        }
        whys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const USER: &str = r#"
[nic]
pmd = "af_xdp"
iface = "ph-a0"

[ipv4]
address = "10.99.0.1/24"

[runtime]
busy_poll_us = 7
"#;

    fn path() -> &'static Path {
        Path::new("user.toml")
    }

    #[test]
    fn every_shipped_profile_validates_and_explains_each_key() {
        let minimal = "[nic]\npmd = \"af_xdp\"\niface = \"ph-a0\"\n[ipv4]\naddress = \"10.99.0.1/24\"\n";
        for p in PROFILES {
            let m = p.apply(minimal, path()).unwrap_or_else(|e| panic!("profile {}: {e}", p.name));
            assert!(!m.settings.is_empty(), "profile {} sets nothing", p.name);
            for s in &m.settings {
                assert!(s.user_value.is_none(), "{}: {}", p.name, s.key);
                assert!(s.why.len() > 40, "profile {}: key {} has no comment saying why", p.name, s.key);
            }
            assert_eq!(Config::parse(&m.text, path()).unwrap(), m.config);
            assert_eq!(m.config.nic.iface, "ph-a0", "a profile never sets the interface");
        }
    }

    #[test]
    fn the_users_explicit_keys_win_over_the_profile() {
        let m = Profile::named("latency").unwrap().apply(USER, path()).unwrap();
        assert_eq!(m.config.runtime.busy_poll_us, 7, "the user's key");
        assert_eq!(m.config.runtime.spin_us, 50, "the profile's key");
        let busy = m.settings.iter().find(|s| s.key == "runtime.busy_poll_us").unwrap();
        assert_eq!((busy.profile_value.as_str(), busy.user_value.as_deref()), ("50", Some("7")));
        let spin = m.settings.iter().find(|s| s.key == "runtime.spin_us").unwrap();
        assert_eq!(spin.user_value, None);
        assert!(spin.why.starts_with("Drive dedicated"), "{}", spin.why);
        let m = Profile::named("throughput").unwrap().apply(USER, path()).unwrap();
        assert_eq!(m.config.nic.mbufs, 32767, "a key added to a section the user has");
        assert_eq!(m.config.nic.pmd, crate::PmdName::AfXdp);
    }

    #[test]
    fn a_config_written_by_lab_up_leaves_the_profiles_keys_to_it() {
        let written = Config::parse(USER, path()).unwrap();
        let mut written = written;
        written.runtime.busy_poll_us = 0;
        let m = Profile::named("latency").unwrap().apply(&written.to_toml(), path()).unwrap();
        assert_eq!((m.config.runtime.busy_poll_us, m.config.runtime.spin_us), (50, 50));
        assert!(m.settings.iter().all(|s| s.user_value.is_none()));
    }

    #[test]
    fn an_unknown_profile_lists_the_known_ones() {
        let e = Profile::named("fast").err().unwrap();
        assert_eq!(
            e,
            "unknown profile \"fast\": the profiles are latency, throughput, redis, nginx, postgres, nginx-reload"
        );
    }

    #[test]
    fn a_bad_user_config_is_named_as_without_a_profile_and_a_bad_merge_names_the_profile() {
        let e = Profile::named("latency").unwrap().apply(&USER.replace("busy_poll_us", "busy_pol_us"), path());
        let e = e.unwrap_err().to_string();
        assert!(e.starts_with("config user.toml line 10: unknown field `busy_pol_us`"), "{e}");
        // A merge the user's config allows alone but not with the profile: inline driving with
        // several shards.
        let sharded = USER.replace("[nic]", "[nic]\nqueues = 2").replace("[runtime]", "[runtime]\nshards = 2");
        let e = Profile::named("redis").unwrap().apply(&sharded, path()).unwrap_err().to_string();
        assert!(e.contains("with profile redis: runtime.shards = 2") && e.contains("inline"), "{e}");
    }
}
