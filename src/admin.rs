//! The owner's dashboard at `/cgi-bin/resolve/admin` (PATH_INFO `/admin`), on only when
//! `admin.password_hash` is set: [`password`] makes and checks that hash.

pub mod password;
