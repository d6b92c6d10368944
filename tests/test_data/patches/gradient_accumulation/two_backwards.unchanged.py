def train(netD, netG, loader, optD, criterion, noise):
    for i, (real, _) in enumerate(loader):
        netD.zero_grad()
        errD_real = criterion(netD(real), 1.0)
        errD_real.backward()
        errD_fake = criterion(netD(netG(noise).detach()), 0.0)
        errD_fake.backward()
        optD.step()
