use sectorcrypt_crypto::*;
#[test]
fn smoke() {
    Backend::Soft.ensure_usable().unwrap();
    // IEEE 1619 vector 2
    let key = hex::decode("1111111111111111111111111111111122222222222222222222222222222222").unwrap();
    let x = Xts::with_backend(&key, Backend::Soft).unwrap();
    let mut t = [0u8;16]; t[0]=0x33; t[1]=0x33; t[2]=0x33; t[3]=0x33; t[4]=0x33;
    let mut b = [0x44u8; 32];
    x.encrypt(&t, &mut b).unwrap();
    assert_eq!(hex::encode(b), "c454185e6a16936e39334038acef838bfb186fff7480adc4289382ecd6d394f0");
}
